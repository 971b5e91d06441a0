package router

import "github.com/ctxtier/ctxtier/ctxstore/router/query"

// The query and answer types live in the leaf package ctxstore/router/query,
// shared with the wire codecs and clients; these are the same types.
type (
	// Hints are an agent's hints on a query.
	Hints = query.Hints
	// Query is a routing query: a namespace plus block hashes or token ids.
	Query = query.Query
	// WorkerResult is one worker's line in a Result.
	WorkerResult = query.WorkerResult
	// Result answers a Query.
	Result = query.Result
	// Load is a worker's load report.
	Load = query.Load
	// Cost is a worker's price for a request, with its parts.
	Cost = query.Cost
)
