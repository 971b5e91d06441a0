// Package resp serves the Redis protocol (RESP2, and RESP3 after HELLO 3)
// over ctxtier's object store, so Redis clients (redis-cli, redis-py,
// LMCache's redis:// connector) read and write keyed values that live in
// the tiers, replicated or erasure-coded like every other block. It is only
// the wire: the request parser (reader.go, bounded and fuzzed), the reply
// encoder (writer.go) and the commands (commands.go); what a key, a replace
// and an expiry mean is ctxstore/object's. docs/resp.md has the command table.
package resp
