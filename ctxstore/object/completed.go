package object

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Completed uploads. S3 answers a CompleteMultipartUpload repeated for an
// upload it completed with the same success: a client retrying after a lost
// response, or several completions of one upload at once. Completing drops
// the upload and part records, so before it drops them a completion writes
// "\x00done\x00<id>": the object key and the completed object's metadata
// (its ETag, size, part count, headers; Modified is when it completed). A
// completion that finds the upload or one of its parts gone answers from
// that record while it is younger than Config.CompletedTTL; SweepUploads
// deletes older ones.

const doneMagic = "CTXC\x01"

func doneKey(id string) []byte { return []byte(reservedPrefix + "done\x00" + id) }

// encodeDone encodes the record of a completion of key with metadata m:
// the key, the object's size, then the rest of m as a manifest that names
// no data block (so its own size is 0).
func encodeDone(key string, m Meta) []byte {
	b := binary.AppendUvarint(appendStr([]byte(doneMagic), key), uint64(m.Size))
	m.Size = 0
	return append(b, manifest{Meta: m}.encode()...)
}

func decodeDone(b []byte) (string, Meta, error) {
	if !bytes.HasPrefix(b, []byte(doneMagic)) {
		return "", Meta{}, fmt.Errorf("%w: record is not a completed upload", block.ErrInvalidArgument)
	}
	r := &reader{b: b[len(doneMagic):]}
	key := r.str("key")
	size := int64(r.uvarint("size", 1<<62))
	if r.err != nil {
		return "", Meta{}, r.err
	}
	m, err := decodeManifest(r.b)
	if err != nil {
		return "", Meta{}, err
	}
	if len(m.Segments) != 0 {
		return "", Meta{}, fmt.Errorf("%w: a completed upload's record names data blocks", block.ErrInvalidArgument)
	}
	m.Size = size
	return key, m.Meta, nil
}

// recordDone writes the record of upload id's completion of key as m.
func (s *Store) recordDone(ctx context.Context, n block.Namespace, id, key string, m Meta) error {
	value := encodeDone(key, m)
	_, err := s.replace(ctx, n, doneKey(id), func(*record) ([]byte, time.Time, bool, error) {
		return value, time.Time{}, true, nil
	}, nil, false)
	return err
}

// completed returns the object key and metadata upload id completed as,
// or ErrNoSuchUpload when it was not completed within Config.CompletedTTL,
// read at lvl.
func (s *Store) completed(ctx context.Context, n block.Namespace, id string, lvl ctxstore.ReadLevel) (string, Meta, error) {
	if !validUploadID(id) {
		return "", Meta{}, fmt.Errorf("%w: %q", ErrNoSuchUpload, id)
	}
	v, err := s.getIn(ctx, n, doneKey(id), lvl)
	if errors.Is(err, block.ErrNotFound) {
		return "", Meta{}, fmt.Errorf("%w: %q", ErrNoSuchUpload, id)
	}
	if err != nil {
		return "", Meta{}, err
	}
	defer v.Release()
	key, m, err := decodeDone(v.Data)
	if err != nil {
		return "", Meta{}, err
	}
	if s.now().Sub(m.Modified) > s.cfg.CompletedTTL {
		return "", Meta{}, fmt.Errorf("%w: %q was completed at %s", ErrNoSuchUpload, id, m.Modified.Format(time.RFC3339))
	}
	return key, m, nil
}

// CompletedUpload returns the object key and metadata of upload id of
// namespace ns if it was completed within Config.CompletedTTL, else
// ErrNoSuchUpload: a repeated CompleteMultipartUpload answers with them.
// It reads at lvl.
func (s *Store) CompletedUpload(ctx context.Context, ns, id string, lvl ctxstore.ReadLevel) (string, Meta, error) {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return "", Meta{}, err
	}
	return s.completed(ctx, n, id, lvl)
}

// sweepDone deletes the completion records in done (id → the time the
// upload completed) older than ttl.
func (s *Store) sweepDone(ctx context.Context, n block.Namespace, done map[string]time.Time, ttl time.Duration) error {
	cut := s.now().Add(-ttl)
	for id, at := range done {
		if !at.After(cut) {
			if _, err := s.deleteKey(ctx, n, doneKey(id), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// doneID returns the upload id of a completion record's key.
func doneID(key []byte) (string, bool) {
	return strings.CutPrefix(string(key), string(doneKey("")))
}
