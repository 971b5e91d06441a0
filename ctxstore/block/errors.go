package block

import "errors"

// Sentinel errors. Every layer wraps one of these with %w and context; the
// gateway maps them to wire codes and HTTP statuses in a single table
// (gateway/errcode), and clients map the codes back to the same sentinels, so
// errors.Is works end to end.
var (
	// ErrNotFound: no such block (or it expired, or failed verification and was dropped).
	ErrNotFound = errors.New("block not found")
	// ErrConflict: a put of an existing key with different bytes. Blocks are
	// immutable; the existing block is kept.
	ErrConflict = errors.New("block exists with different content")
	// ErrChecksum: bytes did not match their checksum (on the wire or at rest).
	ErrChecksum = errors.New("checksum mismatch")
	// ErrUnknownNamespace: the namespace does not exist.
	ErrUnknownNamespace = errors.New("unknown namespace")
	// ErrNamespaceExists: create of a namespace that already exists with another definition.
	ErrNamespaceExists = errors.New("namespace already exists")
	// ErrNamespaceNotEmpty: delete of a namespace that still holds blocks.
	ErrNamespaceNotEmpty = errors.New("namespace not empty")
	// ErrTooLarge: a block or frame over the configured maximum.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidKey: a malformed block hash or part.
	ErrInvalidKey = errors.New("invalid block key")
	// ErrInvalidArgument: any other malformed request.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNoSpace: the tier cannot make room (everything evictable is pinned or leased).
	ErrNoSpace = errors.New("no space in tier")
	// ErrUnavailable: a dependency (a lower tier, a peer, the leader) cannot be
	// reached now; retrying later may succeed. Engines should recompute.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnauthenticated: missing or bad credentials.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: credentials valid but not allowed for this namespace.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrClosed: the component was closed.
	ErrClosed = errors.New("closed")
	// ErrQuotaExceeded: a block is larger than its namespace's byte quota in
	// a tier, or the namespace is at its quota there and none of its own
	// blocks can be evicted (all pinned, leased or being demoted).
	ErrQuotaExceeded = errors.New("namespace quota exceeded")
)
