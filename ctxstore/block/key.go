package block

import (
	"fmt"
	"strconv"
	"strings"
)

// HashHexLen is the length of a hash in its text form: 16 lowercase hex digits.
const HashHexLen = 16

// MaxNamespaceLen bounds a namespace name (it doubles as an S3 bucket name).
const MaxNamespaceLen = 63

// Key names one immutable block: the namespace it lives in, the 64-bit
// sequence hash of its token prefix, and, for tensor-parallel engines that
// store one slice per rank, a part number.
//
// The zero Part with HasPart false means "the whole block"; HasPart true with
// Part r means the slice of tensor-parallel rank r. Keys are comparable and
// are used directly as map keys.
//
// Shard is internal to a cluster: 0 names the whole block (or one replica of
// it); i+1 names Reed-Solomon shard i of an erasure-coded block, as stored in
// one node's tier stack. Shards never appear in engine-facing names: the
// object name, the HTTP path and S3 keys ignore it, and the index in Raft
// holds only whole blocks.
type Key struct {
	Namespace string
	Hash      uint64
	Part      uint16
	HasPart   bool
	Shard     uint8
}

// MaxShard bounds Key.Shard (an erasure code has at most 32 shards; tier
// formats keep 7 bits for it).
const MaxShard = 127

// WithShard returns k naming erasure shard index i (Shard i+1); the whole
// block is Shard 0.
func (k Key) WithShard(i int) Key {
	k.Shard = uint8(i + 1)
	return k
}

// Block returns k naming the whole block (Shard 0).
func (k Key) Block() Key {
	k.Shard = 0
	return k
}

// NewKey returns the key of a whole (unpartitioned) block.
func NewKey(ns string, hash uint64) Key { return Key{Namespace: ns, Hash: hash} }

// WithPart returns k naming the slice of tensor-parallel rank part.
func (k Key) WithPart(part uint16) Key {
	k.Part, k.HasPart = part, true
	return k
}

// ObjectName is the key's name inside its namespace: the 16-hex-digit hash,
// followed by ".N" for part N. It is the URL path element and the S3 object key.
func (k Key) ObjectName() string {
	h := FormatHash(k.Hash)
	if !k.HasPart {
		return h
	}
	return h + "." + strconv.FormatUint(uint64(k.Part), 10)
}

// String renders namespace/object, for logs and errors; a shard key adds
// "#shard" (an internal name, never an object name).
func (k Key) String() string {
	if k.Shard != 0 {
		return k.Namespace + "/" + k.ObjectName() + "#" + strconv.Itoa(int(k.Shard))
	}
	return k.Namespace + "/" + k.ObjectName()
}

// FormatHash renders h as exactly 16 lowercase hex digits.
func FormatHash(h uint64) string {
	const digits = "0123456789abcdef"
	var b [HashHexLen]byte
	for i := HashHexLen - 1; i >= 0; i-- {
		b[i] = digits[h&0xf]
		h >>= 4
	}
	return string(b[:])
}

// ParseHash parses exactly 16 lowercase hex digits. Anything else (wrong
// length, upper case, a sign, a 0x prefix) is ErrInvalidKey: one canonical
// spelling per hash keeps URLs, S3 listings and logs unambiguous.
func ParseHash(s string) (uint64, error) {
	if len(s) != HashHexLen {
		return 0, fmt.Errorf("%w: hash %q must be %d lowercase hex digits", ErrInvalidKey, s, HashHexLen)
	}
	var h uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return 0, fmt.Errorf("%w: hash %q must be %d lowercase hex digits", ErrInvalidKey, s, HashHexLen)
		}
		h = h<<4 | uint64(v)
	}
	return h, nil
}

// ParseObjectName parses "hash" or "hash.part" into a key of namespace ns.
func ParseObjectName(ns, name string) (Key, error) {
	hs, ps, hasPart := strings.Cut(name, ".")
	h, err := ParseHash(hs)
	if err != nil {
		return Key{}, err
	}
	k := NewKey(ns, h)
	if !hasPart {
		return k, nil
	}
	if ps == "" || (len(ps) > 1 && ps[0] == '0') {
		return Key{}, fmt.Errorf("%w: part %q of %q is not a canonical decimal number", ErrInvalidKey, ps, name)
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return Key{}, fmt.Errorf("%w: part %q of %q is not a number in 0..65535", ErrInvalidKey, ps, name)
	}
	return k.WithPart(uint16(p)), nil
}

// ValidNamespaceName reports whether name is usable as a namespace: 1..63
// characters of lowercase letters, digits, '-' and '.', starting and ending
// with a letter or digit (the S3 bucket-name rules, so every namespace is
// also a valid bucket).
func ValidNamespaceName(name string) error {
	if len(name) == 0 || len(name) > MaxNamespaceLen {
		return fmt.Errorf("%w: namespace name %q must be 1..%d characters", ErrInvalidArgument, name, MaxNamespaceLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || ((c == '-' || c == '.') && i > 0 && i < len(name)-1)
		if !ok {
			return fmt.Errorf("%w: namespace name %q: only a-z, 0-9, '-' and '.' (not at either end) are allowed", ErrInvalidArgument, name)
		}
	}
	return nil
}
