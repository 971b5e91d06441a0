package object

import (
	"encoding/binary"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Agent hints on S3 objects. An object put with hints (PutObjectOptions.Hints,
// or an upload's Upload.Hints, recorded when it is created) has every data
// block it is stored as and its manifest record put with them, so the tiers
// treat the object as one unit: reuse=never objects go first, a retain
// window keeps all of it, and the end of its session (ctxstore.Store.
// ReleaseSession) moves all of it to the cold end. Internal records (an
// upload's and its parts' records) carry no hints: releasing or dropping
// them early would only break the upload.

// agentHints returns the agent hints of o alone (Reuse, Retain, Session),
// checked (block.PutOptions.ValidateHints; errors wrap
// block.ErrInvalidArgument).
func agentHints(o block.PutOptions) (block.PutOptions, error) {
	h := block.PutOptions{Reuse: o.Reuse, Retain: o.Retain, Session: o.Session}
	return h, h.ValidateHints()
}

// withHints returns the put options of a block of an object put with hints h.
func withHints(h block.PutOptions, expires time.Time) block.PutOptions {
	return block.PutOptions{Expires: expires, Reuse: h.Reuse, Retain: h.Retain, Session: h.Session}
}

// appendHints encodes h (an upload record's trailer, uploadMagicHints).
func appendHints(b []byte, h block.PutOptions) []byte {
	b = binary.AppendUvarint(b, uint64(h.Reuse))
	b = binary.AppendUvarint(b, uint64(h.Retain))
	return binary.AppendUvarint(b, h.Session)
}

// readHints decodes what appendHints wrote; hints that do not pass
// ValidateHints fail r.
func readHints(r *reader) block.PutOptions {
	h := block.PutOptions{
		Reuse:   block.Reuse(r.uvarint("reuse hint", uint64(block.MaxReuse))),
		Retain:  time.Duration(r.uvarint("retain hint", uint64(block.MaxRetain))),
		Session: r.uvarint("session hint", 1<<64-1),
	}
	if r.err == nil && (h.ValidateHints() != nil || !h.HasHints()) {
		r.fail("hints")
	}
	return h
}
