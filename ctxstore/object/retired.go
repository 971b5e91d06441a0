package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Deferred retirement. Replacing or deleting an object does not delete the
// old version's data blocks at once: a GET already streaming that version
// past the blocks it leased first (WriteRange) would be cut short. Instead
// the writer that removed the old manifest puts a retire record under
// "\x00retire\x00<random id>" naming the old segments and the time it
// retired them, and SweepUploads deletes the data blocks, then the record,
// once Config.RetireGrace has passed (at once when its ttl is 0, before a
// bucket is deleted). The record is a block like any other record, so a
// restart or a failover loses no pending retirement, and the sweep holds at
// most retireBatch record ids in memory at a time. RetireGrace 0 deletes the
// blocks at once (no record).

const retireMagic = "CTXR\x01"

// retireBatch bounds how many due retire records one pass of a sweep
// gathers before it deletes them (then it walks again).
const retireBatch = 1024

func retireKey(id string) []byte { return []byte(reservedPrefix + "retire\x00" + id) }

// retireID returns the id of a retire record's key.
func retireID(key []byte) (string, bool) {
	return strings.CutPrefix(string(key), string(retireKey("")))
}

// encodeRetire encodes a retire record: the segments to delete and when
// they were retired, as a manifest with no metadata.
func encodeRetire(at time.Time, segs []Segment) []byte {
	m := manifest{Meta: Meta{Modified: at}, Segments: segs}
	for _, g := range segs {
		m.Size += g.Size
	}
	return append([]byte(retireMagic), m.encode()...)
}

// decodeRetire parses a retire record. It holds at least one segment and no
// object metadata.
func decodeRetire(b []byte) (time.Time, []Segment, error) {
	if !bytes.HasPrefix(b, []byte(retireMagic)) {
		return time.Time{}, nil, fmt.Errorf("%w: record is not a retire record", block.ErrInvalidArgument)
	}
	m, err := decodeManifest(b[len(retireMagic):])
	switch {
	case err != nil:
		return time.Time{}, nil, err
	case len(m.Segments) == 0:
		return time.Time{}, nil, fmt.Errorf("%w: retire record names no segment", block.ErrInvalidArgument)
	case m.ETag != "" || m.Parts != 0 || len(m.Headers) != 0:
		return time.Time{}, nil, fmt.Errorf("%w: retire record carries object metadata", block.ErrInvalidArgument)
	}
	return m.Modified, m.Segments, nil
}

// retireLater retires segs of namespace n after Config.RetireGrace: it
// records them (see above), or deletes them at once when the grace is 0 or
// the record cannot be written (a reader streaming them is then cut short,
// but nothing leaks).
func (s *Store) retireLater(ctx context.Context, n block.Namespace, segs []Segment) {
	if len(segs) == 0 {
		return
	}
	if s.cfg.RetireGrace == 0 || s.recordRetire(ctx, n, segs) != nil {
		_ = s.retire(ctx, n.Name, segs)
	}
}

// recordRetire puts a retire record of segs under a fresh random id.
func (s *Store) recordRetire(ctx context.Context, n block.Namespace, segs []Segment) error {
	value := encodeRetire(s.now().UTC(), segs)
	id := strconv.FormatUint(rand.Uint64(), 16)
	ok, err := s.replace(ctx, n, retireKey(id), func(cur *record) ([]byte, time.Time, bool, error) {
		return value, time.Time{}, cur == nil, nil
	}, nil, false)
	if err == nil && !ok {
		err = fmt.Errorf("%w: retire record %s exists", block.ErrConflict, id)
	}
	return err
}

// dueRetire appends to ids the id of the record (key, value) when it is a
// retire record due at now with grace wait, or one that does not decode
// (garbage under the reserved key: deleted, so it cannot keep a bucket
// from being deleted), as long as ids holds fewer than retireBatch; it
// reports whether key was a retire record's.
func dueRetire(key, value []byte, now time.Time, wait time.Duration, ids *[]string) bool {
	id, ok := retireID(key)
	if !ok {
		return false
	}
	if at, _, err := decodeRetire(value); (err != nil || !at.Add(wait).After(now)) && len(*ids) < retireBatch {
		*ids = append(*ids, id)
	}
	return true
}

// sweepRetired deletes the data blocks and the records of the retire
// records ids, then, while the last batch was full, walks namespace n for
// more due with grace wait. It returns how many records it deleted.
func (s *Store) sweepRetired(ctx context.Context, n block.Namespace, ids []string, wait time.Duration) (int, error) {
	done := 0
	for {
		for _, id := range ids {
			if err := s.retireNow(ctx, n, id); err != nil {
				return done, err
			}
			done++
		}
		if len(ids) < retireBatch {
			return done, nil
		}
		ids = ids[:0]
		now := s.now()
		if err := s.walk(ctx, n.Name, func(key, value []byte) error {
			dueRetire(key, value, now, wait, &ids)
			return nil
		}, ctxstore.ReadLocal); err != nil {
			return done, err
		}
	}
}

// retireNow deletes the data blocks retire record id names, then the
// record. Deleting a block already gone is no error, so sweeps racing on
// one record (every node sweeps) and a sweep stopped between the two steps
// are harmless: the record outlives its blocks, never the reverse.
func (s *Store) retireNow(ctx context.Context, n block.Namespace, id string) error {
	v, err := s.getIn(ctx, n, retireKey(id), ctxstore.ReadLocal)
	if errors.Is(err, block.ErrNotFound) {
		return nil // another sweep took it
	}
	if err != nil {
		return err
	}
	_, segs, derr := decodeRetire(v.Data)
	v.Release()
	if derr == nil {
		if err := s.retire(ctx, n.Name, segs); err != nil {
			return err // the record stays: the next sweep tries again
		}
	}
	_, err = s.deleteKey(ctx, n, retireKey(id), nil)
	return err
}
