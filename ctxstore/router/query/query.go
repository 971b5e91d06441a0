// Package query holds the routing query and its answer (Query, Result and
// the types inside them): the vocabulary that the KV-aware router
// (ctxstore/router), its wire codecs (gateway/native/wire, the routing HTTP
// API) and clients share. It is a leaf that imports only the standard
// library, so a client can build and read routing queries without importing
// the router. ctxstore/router re-exports each type under the same name.
package query

import "time"

// Hints are an agent's hints on a query.
type Hints struct {
	// Priority 0..block.MaxPriority; higher is routed more greedily (the
	// temperature is scaled by 1 - Priority/MaxPriority).
	Priority uint8
	// ExpectedOutputTokens is added to the chosen worker's predicted decode load.
	ExpectedOutputTokens int
	// PinTTL (cache_control) pins the prefix ctxtier holds for this long, so
	// it survives a tool call.
	PinTTL time.Duration
	// Retain is a read hint: the harness will send this context again
	// within it (a tool call is running). The prefix ctxtier holds (what
	// TierDepth reports) has its retain window re-armed to end this long
	// after the query, as a GET or LOOKUP with a read hint does. 0: none.
	Retain time.Duration
}

// Query is a routing query: a namespace plus block hashes or token ids.
type Query struct {
	Namespace   string
	BlockHashes []uint64
	TokenIDs    []uint32 // used when BlockHashes is empty
	Temperature *float64 // nil: the configured default
	Hints       Hints
	MaxWorkers  int // 0: the configured default
	// Commit adds the request's predicted load to the recommended worker.
	Commit bool
}

// WorkerResult is one worker's line in a Result.
type WorkerResult struct {
	Worker string `json:"worker"`
	Device int    `json:"device"`
	Host   int    `json:"host"`
	Disk   int    `json:"disk"`
	Stale  bool   `json:"stale,omitempty"`
	Load   Load   `json:"load"`
	Cost   Cost   `json:"cost"`
}

// Result answers a Query.
type Result struct {
	Namespace   string         `json:"namespace"`
	Blocks      int            `json:"blocks"`
	BlockTokens int            `json:"block_tokens"`
	TierDepth   int            `json:"tier_depth"`
	TierError   string         `json:"tier_error,omitempty"`
	Recommended string         `json:"recommended,omitempty"`
	Cost        *Cost          `json:"cost,omitempty"`
	Workers     []WorkerResult `json:"workers"`
	Pinned      int            `json:"pinned,omitempty"`
	PinError    string         `json:"pin_error,omitempty"`
	Hashes      []uint64       `json:"-"` // the hashes used (computed from tokens if so)
}

// Load is a worker's load report: the blocks of requests it is prefilling and
// decoding right now.
type Load struct {
	PrefillBlocks int64 `json:"active_prefill_blocks"`
	DecodeBlocks  int64 `json:"active_decode_blocks"`
}

// Cost is a worker's price for a request, with its parts.
type Cost struct {
	Seconds         float64 `json:"seconds"`
	RecomputeSec    float64 `json:"recompute_seconds"`
	LoadSec         float64 `json:"local_load_seconds"`
	FetchSec        float64 `json:"fetch_seconds"`
	QueueSec        float64 `json:"queue_seconds"`
	CachedBlocks    int     `json:"cached_blocks"`    // on the device: free
	LocalBlocks     int     `json:"local_blocks"`     // loaded from host or disk
	FetchBlocks     int     `json:"fetch_blocks"`     // fetched from ctxtier
	RecomputeBlocks int     `json:"recompute_blocks"` // prefilled
}
