package client

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// Options configure a Client.
type Options struct {
	// Conns is the number of pooled connections; calls are spread over them
	// round robin and pipelined on each.
	Conns int
	// DialTimeout bounds dialing and the handshake of one connection (the
	// context given to Dial may end it sooner).
	DialTimeout time.Duration
	// WriteTimeout bounds writing one request frame (0: none).
	WriteTimeout time.Duration
	// DirectFallback makes ReadDirect read with GET, from then on, when the
	// server is not co-located (a descriptor's file cannot be opened here),
	// instead of returning *NotColocatedError.
	DirectFallback bool
	// DirectVerify is how a direct read checks a DRAM block it copied out
	// of the server's memory file: VerifyChecksum (the default) or
	// VerifyVersion. NVMe reads always check the CRC-32C.
	DirectVerify VerifyMode
	// DirectPromote asks DESCRIBE to read a block that is below DRAM into
	// DRAM first and describe that copy (wire.DescribeFlagPromote): for
	// readers that would otherwise read the block over the network so that
	// its holder promotes it (many readers of the same blocks: each byte
	// leaves the lower tiers once). Sent together with the version-word
	// flag's fallback: a server that refuses the flags word gets neither.
	DirectPromote bool
	// AccessKeyID and Secret are the credentials (from `ctxctl keys
	// create`) for a server started with --auth required. The handshake
	// proves the secret with an HMAC of a server-sent nonce; the secret
	// itself never crosses the wire. Empty: connect anonymously.
	AccessKeyID string
	Secret      string
	// TierVerify makes the server's DRAM tier verify every GET block at
	// rest as well, as it does for readers that do not check the bytes
	// themselves. By default the client declares in its handshake that it
	// verifies every GET block against the CRC-32C recorded at put time
	// (it always does), which covers the tier's memory, the server's copy,
	// the wire and this process's buffer, and the tier skips its own pass;
	// a block that fails is read once more with the tier's verification,
	// which drops it if it is corrupt at rest (docs/protocol.md,
	// "Checksums"). The client's own check runs either way.
	TierVerify bool
	// TLS, when set, wraps every native connection in TLS; the TLS
	// handshake runs within DialTimeout, before the protocol's own. An
	// empty ServerName becomes the host part of the dialed address (ctxd
	// peers pass raft.TLS.ClientConfig). nil: plain TCP.
	TLS *tls.Config
	// NoRedial: a broken connection is not dialed again; calls that would
	// use it fail with block.ErrUnavailable, and the caller dials a new
	// Client: for a caller that checks who answers on each new
	// connection, so that none escapes that check (a restarted server's
	// old port may belong to another node by then).
	NoRedial bool

	// version overrides the protocol version sent in the handshake (tests).
	version uint16
}

// DefaultOptions returns the defaults: 2 connections, 5 s dial timeout, 30 s
// write timeout.
func DefaultOptions() Options {
	return Options{Conns: 2, DialTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Conns == 0 {
		o.Conns = d.Conns
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = d.DialTimeout
	}
	return o
}

// Validate checks the options (after zero fields took their defaults).
func (o Options) Validate() error {
	switch {
	case o.Conns < 1 || o.Conns > 1024:
		return fmt.Errorf("%w: client: Conns %d out of range 1..1024", block.ErrInvalidArgument, o.Conns)
	case o.DialTimeout < 0 || o.WriteTimeout < 0:
		return fmt.Errorf("%w: client: timeouts must not be negative", block.ErrInvalidArgument)
	case o.DirectVerify > VerifyVersion:
		return fmt.Errorf("%w: client: DirectVerify %d is not a verify mode", block.ErrInvalidArgument, o.DirectVerify)
	case (o.AccessKeyID == "") != (o.Secret == ""):
		return fmt.Errorf("%w: client: AccessKeyID and Secret go together", block.ErrInvalidArgument)
	}
	if err := wire.ValidAccessKeyID(o.AccessKeyID); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// VerifyMode is how ReadLease checks the bytes it copied out of a DRAM
// tier's memory file.
type VerifyMode uint8

const (
	// VerifyChecksum computes the CRC-32C of the copy, chunk by chunk while
	// copying, and compares it with the descriptor's: end to end, and it
	// also catches corruption at rest. A 2 MiB read costs the copy plus
	// the checksum pass (about 0.35-0.4x a plain memcpy, docs/benchmarks.md).
	VerifyChecksum VerifyMode = iota
	// VerifyVersion copies with a plain memmove and then checks the block's
	// version word (a seqlock: the server bumps it before the block's pages
	// can be reused; docs/tiers.md, "Version words"): it proves that no
	// byte of the copy was written after the block was stored, without a
	// pass over the bytes. It does not hash them, so unlike VerifyChecksum
	// it does not catch corruption at rest (a memory fault in the arena
	// after the put); GETs still do (this client's CRC-32C, or the tier's
	// xxh3 for readers that do not verify themselves). Where the
	// server sends no version word (an older server) or this architecture
	// has no fence for it (descriptor.VersionReads: only amd64 and arm64 do),
	// reads check the checksum instead.
	VerifyVersion
)

// String names the mode as ctxbench's --verify does.
func (m VerifyMode) String() string {
	switch m {
	case VerifyChecksum:
		return "checksum"
	case VerifyVersion:
		return "version"
	}
	return fmt.Sprintf("verify(%d)", uint8(m))
}

// ParseVerifyMode parses "checksum" or "version".
func ParseVerifyMode(s string) (VerifyMode, error) {
	for _, m := range []VerifyMode{VerifyChecksum, VerifyVersion} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: verify mode %q (want checksum or version)", block.ErrInvalidArgument, s)
}
