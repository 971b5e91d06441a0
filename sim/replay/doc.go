// Package replay replays a Mooncake-format request trace through simulated
// prefill and decode workers to measure what fetching cached KV blocks from
// ctxtier saves against recomputing them.
//
// The simulation is a discrete-event simulation in virtual time. Each
// prefill worker serves its queue one request at a time: it finds the longest
// prefix of the request's blocks in its own simulated HBM (a capacity-bounded
// LRU), then, under the shared-tier policy, in ctxtier (Lookup over the real
// API), fetches those blocks over the real API (real bytes, verified),
// "computes" the rest with a tokens-per-second cost model, puts the blocks
// ctxtier lacks, and hands the request off to a decode worker. Time to first
// token is queueing plus measured routing, lookup, fetch and put time plus
// modelled compute and the modelled transfer of the bytes a scaled-down run
// does not send (see Config.BytesScale).
//
// Several policies run over the same trace in one run (Policy): no cache,
// per-worker HBM with round-robin routing, per-worker HBM with KV-aware
// routing, and the shared tier with tier-aware routing. Routing goes through
// ctxstore/router, in process (LocalRouter) or behind any RouterClient.
//
// The real calls run one at a time by default, their measured durations
// part of the schedule. With Config.Concurrency above 1 they run as
// engines make them: each worker over its own client, its puts on its own
// goroutine, concurrently with the other workers' calls; an ordering rule
// (lanes.go) keeps every tier answer that of the sequential run with calls
// that take no time while the tier does not evict.
package replay
