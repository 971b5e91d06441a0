package kvevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
)

// Envelope is the HTTP/JSON form of a batch, with the routing fields the ZMQ
// form carries out of band (which worker, its sequence number):
//
//	{"namespace": "llama", "worker": "vllm-0", "seq": 41,
//	 "ts": 1718000000.5, "data_parallel_rank": 0,
//	 "events": [
//	   {"type": "BlockStored", "block_hashes": [11, "00000000000000ff"],
//	    "parent_block_hash": null, "token_ids": [1, 2], "block_size": 16,
//	    "lora_id": null, "medium": "GPU"},
//	   {"type": "BlockRemoved", "block_hashes": [11], "medium": "GPU"},
//	   {"type": "AllBlocksCleared"}],
//	 "load": {"active_prefill_blocks": 3, "active_decode_blocks": 120}}
//
// Event fields are those of vLLM's events. A hash is a JSON integer (exact,
// up to 64 bits, negative values kept as their 64-bit pattern) or a string
// of 16 lowercase hex digits. "dump": true replaces the worker's entries with
// the batch's BlockStored events. Either events or load may be absent.
type Envelope struct {
	Source
	Seq    uint64
	HasSeq bool
	Stream string
	Dump   bool
	Batch  Batch
	Load   *router.Load
}

type jsonEnvelope struct {
	Namespace string       `json:"namespace"`
	Worker    string       `json:"worker"`
	Seq       *uint64      `json:"seq"`
	Stream    string       `json:"stream"`
	TS        float64      `json:"ts"`
	DPRank    *int         `json:"data_parallel_rank"`
	Dump      bool         `json:"dump"`
	Events    []jsonEvent  `json:"events"`
	Load      *router.Load `json:"load"`
}

type jsonEvent struct {
	Type        string  `json:"type"`
	BlockHashes []Hash  `json:"block_hashes"`
	Parent      *Hash   `json:"parent_block_hash"`
	BlockSize   int     `json:"block_size"`
	Medium      *string `json:"medium"`
	GroupIdx    *int    `json:"group_idx"`
}

// Hash is a block hash in JSON: an integer (exact, up to 64 bits; negative
// values keep their 64-bit pattern) or a string of 16 lowercase hex digits.
type Hash uint64

func (h *Hash) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := block.ParseHash(s)
		if err != nil {
			return err
		}
		*h = Hash(v)
		return nil
	}
	s := string(b)
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		*h = Hash(v)
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("hash %s is not a 64-bit integer or a 16-hex-digit string", s)
	}
	*h = Hash(uint64(v))
	return nil
}

// DecodeJSON reads one Envelope of at most max bytes. Errors wrap
// block.ErrInvalidArgument (or block.ErrTooLarge).
func DecodeJSON(r io.Reader, max int) (Envelope, error) {
	body, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: reading KV events: %v", block.ErrInvalidArgument, err)
	}
	if len(body) > max {
		return Envelope{}, fmt.Errorf("%w: KV event body over %d bytes", block.ErrTooLarge, max)
	}
	var je jsonEnvelope
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&je); err != nil {
		return Envelope{}, fmt.Errorf("%w: KV events JSON: %v", block.ErrInvalidArgument, err)
	}
	// Only white space may follow the object. (Decoder.More alone misses a
	// stray closing bracket: it reports no more elements there.)
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Envelope{}, fmt.Errorf("%w: KV events JSON: trailing data", block.ErrInvalidArgument)
	}
	if je.Namespace == "" {
		je.Namespace = block.DefaultNamespace
	}
	if err := block.ValidNamespaceName(je.Namespace); err != nil {
		return Envelope{}, err
	}
	if je.Worker == "" {
		return Envelope{}, fmt.Errorf("%w: KV events need \"worker\"", block.ErrInvalidArgument)
	}
	env := Envelope{
		Source: Source{Proto: "http", Namespace: je.Namespace, Worker: je.Worker},
		Stream: je.Stream, Dump: je.Dump, Load: je.Load,
		Batch: Batch{TS: je.TS, Events: make([]router.Event, 0, len(je.Events))},
	}
	if je.Seq != nil {
		env.Seq, env.HasSeq = *je.Seq, true
	}
	if je.DPRank != nil {
		if *je.DPRank < 0 {
			return Envelope{}, fmt.Errorf("%w: negative data_parallel_rank", block.ErrInvalidArgument)
		}
		env.Batch.DPRank, env.Batch.HasDPRank = *je.DPRank, true
	}
	for i, e := range je.Events {
		ev, keep, err := e.event()
		if err != nil {
			return Envelope{}, fmt.Errorf("%w: event %d: %v", block.ErrInvalidArgument, i, err)
		}
		if keep {
			env.Batch.Events = append(env.Batch.Events, ev)
		} else {
			env.Batch.Skipped++
		}
	}
	return env, nil
}

func (e jsonEvent) event() (router.Event, bool, error) {
	r := rawEvent{tag: e.Type, blockSize: int64(e.BlockSize)}
	if e.BlockSize < 0 {
		return router.Event{}, false, errors.New("negative block_size")
	}
	r.hashes = make([]uint64, len(e.BlockHashes))
	for i, h := range e.BlockHashes {
		r.hashes[i] = uint64(h)
	}
	if e.Parent != nil {
		r.parent, r.hasParent = uint64(*e.Parent), true
	}
	if e.Medium != nil {
		r.medium = *e.Medium
	}
	if e.GroupIdx != nil {
		r.group = int64(*e.GroupIdx)
	}
	return r.event()
}
