// Package block is ctxtier's shared vocabulary: block keys, namespaces,
// checksums, the engines' hash schemes, block references and the sentinel
// errors every layer wraps. It is a leaf: it imports nothing from ctxtier, so
// raft/ and tiers/ may depend on it without knowing anything of the store or
// the wire.
package block
