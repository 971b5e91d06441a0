package kvevent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// Batch is one decoded KVEventBatch.
type Batch struct {
	TS        float64
	Events    []router.Event
	DPRank    int
	HasDPRank bool
	// Skipped counts events left out: unknown event types (a newer engine)
	// and events of KV-cache groups other than 0 (hybrid models).
	Skipped int
}

// maxEvents bounds one batch's events (each event needs at least one byte, so
// the payload size bounds it too).
const maxEvents = 1 << 20

// DecodeBatch decodes a msgpack KVEventBatch payload as vLLM and Dynamo
// publish it. Both layouts msgspec produces are accepted:
//
//   - the batch as an array [ts, events, data_parallel_rank?] (array_like)
//     or a map {"ts", "events", "data_parallel_rank"};
//   - each event as a tagged array ["BlockStored", field, ...] (array_like
//     with tag) or a tagged map {"type": "BlockStored", field: value, ...}.
//
// Positional fields follow vLLM's declaration order: BlockStored is
// block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
// lora_name, extra_keys, group_idx, ...; BlockRemoved is block_hashes, medium,
// group_idx, .... Trailing fields may be absent (omit_defaults) and unknown
// trailing fields or map keys are skipped. A block hash is an integer (signed
// or unsigned; its 64-bit pattern is kept) or bytes (vLLM's raw hash): bytes
// reduce to their last 8 bytes read big-endian, which is what vLLM's own
// int form (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES) computes, so both settings
// index the same keys.
//
// Any malformed input is an error wrapping errcode.ErrMalformedFrame, and
// nothing of the batch is returned.
func DecodeBatch(payload []byte) (Batch, error) {
	d := msgpack.NewDecoder(bytes.NewReader(payload))
	b, err := decodeBatch(d, len(payload))
	if err != nil {
		return Batch{}, fmt.Errorf("%w: KV event batch: %v", errcode.ErrMalformedFrame, err)
	}
	if _, err := d.PeekCode(); err == nil {
		return Batch{}, fmt.Errorf("%w: KV event batch: trailing bytes", errcode.ErrMalformedFrame)
	}
	return b, nil
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func decodeBatch(d *msgpack.Decoder, size int) (Batch, error) {
	var b Batch
	c, err := d.PeekCode()
	if err != nil {
		return b, err
	}
	switch {
	case isArray(c):
		n, err := d.DecodeArrayLen()
		if err != nil {
			return b, err
		}
		if n < 2 {
			return b, fmt.Errorf("batch array has %d elements, want [ts, events, dp_rank?]", n)
		}
		if b.TS, err = d.DecodeFloat64(); err != nil {
			return b, fmt.Errorf("ts: %v", err)
		}
		if err := decodeEvents(d, &b, size); err != nil {
			return b, err
		}
		if n >= 3 {
			if err := decodeDPRank(d, &b); err != nil {
				return b, err
			}
		}
		for i := 3; i < n; i++ {
			if err := d.Skip(); err != nil {
				return b, err
			}
		}
		return b, nil
	case isMap(c):
		n, err := d.DecodeMapLen()
		if err != nil {
			return b, err
		}
		seen := false
		for range n {
			k, err := d.DecodeString()
			if err != nil {
				return b, fmt.Errorf("batch key: %v", err)
			}
			switch k {
			case "ts":
				if b.TS, err = d.DecodeFloat64(); err != nil {
					return b, fmt.Errorf("ts: %v", err)
				}
			case "events":
				if err := decodeEvents(d, &b, size); err != nil {
					return b, err
				}
				seen = true
			case "data_parallel_rank", "dp_rank":
				if err := decodeDPRank(d, &b); err != nil {
					return b, err
				}
			default:
				if err := d.Skip(); err != nil {
					return b, err
				}
			}
		}
		if !seen {
			return b, errors.New("batch map has no events")
		}
		return b, nil
	}
	return b, fmt.Errorf("batch is msgpack type 0x%02x, want an array or a map", c)
}

func decodeDPRank(d *msgpack.Decoder, b *Batch) error {
	if nilNext(d) {
		return d.DecodeNil()
	}
	r, err := d.DecodeInt64()
	if err != nil || r < 0 || r > math.MaxInt32 {
		return fmt.Errorf("data_parallel_rank: bad value (%v)", err)
	}
	b.DPRank, b.HasDPRank = int(r), true
	return nil
}

func nilNext(d *msgpack.Decoder) bool {
	c, err := d.PeekCode()
	return err == nil && c == msgpcode.Nil
}

func decodeEvents(d *msgpack.Decoder, b *Batch, size int) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("events: %v", err)
	}
	if n < 0 || n > maxEvents || n > size {
		return fmt.Errorf("events: bad count %d", n)
	}
	b.Events = make([]router.Event, 0, n)
	for i := range n {
		ev, keep, err := decodeEvent(d, size)
		if err != nil {
			return fmt.Errorf("event %d: %v", i, err)
		}
		if keep {
			b.Events = append(b.Events, ev)
		} else {
			b.Skipped++
		}
	}
	return nil
}

// rawEvent gathers an event's fields in either layout before interpretation.
type rawEvent struct {
	tag       string
	hashes    []uint64
	parent    uint64
	hasParent bool
	blockSize int64
	medium    string
	group     int64
}

// storedFields and removedFields are vLLM's positional field orders.
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
)

func decodeEvent(d *msgpack.Decoder, size int) (router.Event, bool, error) {
	var r rawEvent
	c, err := d.PeekCode()
	if err != nil {
		return router.Event{}, false, err
	}
	switch {
	case isArray(c):
		n, err := d.DecodeArrayLen()
		if err != nil {
			return router.Event{}, false, err
		}
		if n < 1 {
			return router.Event{}, false, errors.New("empty event array (no tag)")
		}
		if r.tag, err = d.DecodeString(); err != nil {
			return router.Event{}, false, fmt.Errorf("tag: %v", err)
		}
		var fields []string
		switch r.tag {
		case "BlockStored":
			fields = storedFields
		case "BlockRemoved":
			fields = removedFields
		}
		for i := 1; i < n; i++ {
			name := ""
			if i-1 < len(fields) {
				name = fields[i-1]
			}
			if err := r.field(d, name, size); err != nil {
				return router.Event{}, false, err
			}
		}
	case isMap(c):
		n, err := d.DecodeMapLen()
		if err != nil {
			return router.Event{}, false, err
		}
		for range n {
			k, err := d.DecodeString()
			if err != nil {
				return router.Event{}, false, fmt.Errorf("key: %v", err)
			}
			if k == "type" {
				if r.tag, err = d.DecodeString(); err != nil {
					return router.Event{}, false, fmt.Errorf("type: %v", err)
				}
				continue
			}
			if err := r.field(d, k, size); err != nil {
				return router.Event{}, false, err
			}
		}
	default:
		return router.Event{}, false, fmt.Errorf("event is msgpack type 0x%02x, want an array or a map", c)
	}
	return r.event()
}

// field decodes one field by name; unknown names are skipped.
func (r *rawEvent) field(d *msgpack.Decoder, name string, size int) error {
	var err error
	switch name {
	case "block_hashes":
		r.hashes, err = decodeHashes(d, size)
	case "parent_block_hash":
		if nilNext(d) {
			return d.DecodeNil()
		}
		r.parent, err = decodeHash(d)
		r.hasParent = err == nil
	case "token_ids":
		// Not needed to index (the hashes are), but it must be a list.
		var n int
		if n, err = d.DecodeArrayLen(); err == nil {
			for i := 0; i < n && err == nil; i++ {
				err = d.Skip()
			}
		}
	case "block_size":
		r.blockSize, err = d.DecodeInt64()
		if err == nil && (r.blockSize < 0 || r.blockSize > 1<<20) {
			err = fmt.Errorf("block_size %d out of range", r.blockSize)
		}
	case "medium":
		if nilNext(d) {
			return d.DecodeNil()
		}
		r.medium, err = d.DecodeString()
	case "group_idx":
		if nilNext(d) {
			return d.DecodeNil()
		}
		r.group, err = d.DecodeInt64()
	default:
		err = d.Skip()
	}
	if err != nil {
		if name == "" {
			name = "extra field"
		}
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

func (r *rawEvent) event() (router.Event, bool, error) {
	var ev router.Event
	switch r.tag {
	case "BlockStored":
		ev.Kind = router.Stored
		ev.Parent, ev.HasParent = r.parent, r.hasParent
		ev.BlockSize = int(r.blockSize)
	case "BlockRemoved":
		ev.Kind = router.Removed
	case "AllBlocksCleared":
		ev.Kind = router.Cleared
		return ev, true, nil
	case "":
		return ev, false, errors.New("event has no type tag")
	default:
		return ev, false, nil // an event kind this build does not know
	}
	if r.group != 0 {
		return ev, false, nil
	}
	m, err := router.ParseMedium(r.medium)
	if err != nil {
		return ev, false, err
	}
	ev.Medium = m
	ev.Hashes = r.hashes
	return ev, true, nil
}

func decodeHashes(d *msgpack.Decoder, size int) ([]uint64, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > size {
		return nil, fmt.Errorf("bad hash count %d", n)
	}
	hs := make([]uint64, n)
	for i := range hs {
		if hs[i], err = decodeHash(d); err != nil {
			return nil, fmt.Errorf("hash %d: %v", i, err)
		}
	}
	return hs, nil
}

// decodeHash reads an integer hash (its 64-bit pattern) or a bytes hash
// (reduced by HashFromBytes).
func decodeHash(d *msgpack.Decoder) (uint64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	if msgpcode.IsBin(c) {
		b, err := d.DecodeBytes()
		if err != nil {
			return 0, err
		}
		if len(b) == 0 {
			return 0, errors.New("empty bytes hash")
		}
		return HashFromBytes(b), nil
	}
	switch {
	case msgpcode.IsFixedNum(c), c == msgpcode.Uint8, c == msgpcode.Uint16, c == msgpcode.Uint32, c == msgpcode.Uint64,
		c == msgpcode.Int8, c == msgpcode.Int16, c == msgpcode.Int32, c == msgpcode.Int64:
		return d.DecodeUint64()
	}
	return 0, fmt.Errorf("hash is msgpack type 0x%02x, want an integer or bytes", c)
}

// HashFromBytes reduces a bytes block hash to 64 bits as vLLM does for its
// integer event form: int.from_bytes(h, "big") & (2**64 - 1), that is, the
// last 8 bytes big-endian (shorter hashes are zero-extended on the left).
func HashFromBytes(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b[len(b)-8:])
	}
	var buf [8]byte
	copy(buf[8-len(b):], b)
	return binary.BigEndian.Uint64(buf[:])
}
