// Package ctxstore is the domain layer of ctxtier: the Store that engines,
// routers and operators talk to through the gateway. On one node it validates
// keys and namespaces, verifies checksums, enforces immutability (a re-put with
// other bytes is a conflict, never an overwrite) and delegates bytes to the
// node's tier stack. Namespaces come from a Catalog, which is a local file on a
// single node and the Raft-replicated state in a cluster. A read looks its
// namespace up once (or takes the one its caller resolved) and hands it down
// to the tier with the read's other options (ReadOptions, block.GetOptions).
// Every read, Get aside (a local read with the default options), takes its
// ReadOptions, read level included, as a parameter, never from its context.
package ctxstore
