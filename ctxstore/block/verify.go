package block

import "context"

type readerVerifiesKey struct{}

// WithReaderVerify marks ctx as the context of a read whose reader checks
// every byte of the block against Ref.Sum (the CRC-32C recorded at put time)
// before it uses them, and on a mismatch reads the block again without this
// mark. A tier may then skip its own at-rest verification of the bytes it
// hands out: the reader's check covers them, and more (the copy on the way
// and in the reader's memory). Only tiers/dram honours it; every other tier
// verifies as always. The native server sets it for the GETs of a client
// that declared end-to-end verification in its handshake.
//
// A Ref read under this mark may hold corrupt bytes: a layer that uses the
// bytes itself (copies them, decodes erasure shards, hands them on to a
// reader that does not verify) must read with WithoutReaderVerify.
func WithReaderVerify(ctx context.Context) context.Context {
	return context.WithValue(ctx, readerVerifiesKey{}, true)
}

// WithoutReaderVerify undoes WithReaderVerify, for a layer that passes ctx
// on but consumes the bytes itself; it returns ctx unchanged when ctx
// carries no mark.
func WithoutReaderVerify(ctx context.Context) context.Context {
	if !ReaderVerifies(ctx) {
		return ctx
	}
	return context.WithValue(ctx, readerVerifiesKey{}, false)
}

// ReaderVerifies reports whether ctx carries WithReaderVerify's mark.
func ReaderVerifies(ctx context.Context) bool {
	v, _ := ctx.Value(readerVerifiesKey{}).(bool)
	return v
}
