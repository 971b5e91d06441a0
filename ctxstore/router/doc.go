// Package router answers "which worker should take this request, and how much
// of its prefix can be reused, from where".
//
// It keeps an in-memory positional index of the KV-cache blocks that inference
// workers hold: per (position, block hash), the set of (worker, medium) pairs
// that hold that block, built from the engines' KV events (see gateway/kvevent).
// A query walks the request's block hashes position by position and returns,
// per worker, the matched prefix depth on device, host and disk, the prefix
// depth ctxtier itself holds (TierIndex), and a recommended worker chosen by a
// cost that weighs recompute, fetch from the tier and worker load, optionally
// sampled with a temperature instead of taking the cheapest.
//
// Concurrency: each worker's events are applied by one writer at a time (the
// worker's own lock); any number of readers query concurrently. The position
// map is sharded, each shard behind a RWMutex, and a query takes one shard read
// lock per position. Memory is accounted per indexed entry and bounded by a
// budget; when over it, the entries stored longest ago are evicted first, and a
// worker marked stale (sequence gap) loses its entries before any fresh one.
package router
