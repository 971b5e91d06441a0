// Package kvevent ingests inference engines' KV-cache events into the router's
// index: the ZMQ stream that vLLM (and Dynamo's vLLM/SGLang publishers) emit —
// PUB multipart frames [topic, 8-byte big-endian sequence, msgpack
// KVEventBatch] — and an HTTP/JSON form of the same batches.
//
// Sequence numbers are tracked per worker. A gap is counted in a metric and
// logged; when the source has a replay endpoint (vLLM's ROUTER socket) the
// missing batches are requested and applied in order, and otherwise, or when
// the replay falls short, the worker's entries are marked stale until a full
// dump, or an AllBlocksCleared, makes them trustworthy again. A sequence that
// goes backwards (or a new publisher stream id) is a worker restart: its
// entries are dropped, since a restarted engine starts with an empty cache.
package kvevent
