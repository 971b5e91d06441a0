package block

import "time"

// GetOptions are a read's options, passed explicitly to Storage.Get by
// every layer (the Store, the cluster backend, the tier manager, a chain of
// lower tiers) down to the tier that holds the bytes. The zero value is a
// plain read: the namespace unknown to the caller, the tier verifying the
// bytes, no retain window.
type GetOptions struct {
	// Namespace is key's namespace, already resolved by the caller in this
	// request (the Store looks it up once), so no layer below looks it up
	// again. The zero value (or a namespace of another name) means the
	// layer that needs it looks it up itself. It is a value, not a
	// pointer, so that handing it down allocates nothing.
	Namespace Namespace
	// ReaderVerifies says that the reader checks every byte of the block
	// against Ref.Sum (the CRC-32C recorded at put time), or, for an S3
	// object's data blocks, every byte it receives against a digest of its
	// own (ctxstore/object.RangeOptions), before it uses them and, on a
	// mismatch, reads again without it. A tier may then skip
	// its own at-rest check of the bytes: the reader's check covers them
	// and more (the copy on the way and in the reader's memory). Only
	// tiers/dram honours it; every other tier verifies as always. A Ref
	// read with it may hold corrupt bytes, so a layer that uses the bytes
	// itself (copies them, decodes erasure shards, hands them on to a
	// reader that does not verify) reads with it false.
	ReaderVerifies bool
	// Retain is the read's agent hint (0: none): the caller expects to come
	// back for the block within Retain (a tool call is running), so its
	// retain window is re-armed to end Retain from now. Only tiers whose
	// policy honours hints use it; a cluster passes it on to the member it
	// reads from.
	Retain time.Duration
}

// Resolved reports whether o.Namespace is the namespace named name, so a
// layer may use it instead of looking name up.
func (o *GetOptions) Resolved(name string) bool {
	return name != "" && o.Namespace.Name == name
}
