package ctxstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ConditionalDeleter is a Tier that deletes a block only while it still
// holds the bytes whose CRC-32C is sum, atomically (the cluster backend
// commits a delete conditioned on the index entry's generation).
// DeleteIf is block.ErrNotFound when the key is absent or holds other
// bytes, and then changes nothing.
type ConditionalDeleter interface {
	DeleteIf(ctx context.Context, key block.Key, sum uint32) error
}

// deleteLocks serialises the check and the delete of DeleteIf on a tier
// that is not a ConditionalDeleter (one process's tiers): between the two
// no other DeleteIf of the key can run, and no put of other bytes can land
// while the block is still there (a put onto a present key with other
// bytes is a conflict), so the pair is atomic for callers that retire a
// key's blocks only through DeleteIf.
var deleteLocks [64]sync.Mutex

// DeleteIf deletes key only if it holds the bytes whose CRC-32C is sum (a
// block read earlier, Ref.Sum); otherwise, or when it is absent, it is
// block.ErrNotFound and nothing changes. It lets a writer retire the
// version it read without ever removing a newer one put in its place.
func (s *Store) DeleteIf(ctx context.Context, key block.Key, sum uint32) error {
	if _, err := s.catalog.Namespace(key.Namespace); err != nil {
		return err
	}
	if cd, ok := s.tier.(ConditionalDeleter); ok {
		return cd.DeleteIf(ctx, key, sum)
	}
	return DeleteTierIf(ctx, s.tier, key, sum)
}

// DeleteTierIf is DeleteIf on one process's tier stack t (no catalog, no
// ConditionalDeleter): it deletes key only while t holds the bytes whose
// CRC-32C is sum, under the same per-key locks as Store.DeleteIf, so a
// node's own conditional shard deletes (ctxstore/cluster) and those its
// peers send through the native protocol's DELETE_IF never interleave.
// Absent, or holding other bytes: block.ErrNotFound, nothing changes.
func DeleteTierIf(ctx context.Context, t Tier, key block.Key, sum uint32) error {
	mu := &deleteLocks[(key.Hash^uint64(key.Part)^uint64(key.Shard))%uint64(len(deleteLocks))]
	mu.Lock()
	defer mu.Unlock()
	info, err := t.Stat(ctx, key)
	if err != nil {
		return err
	}
	if info.Sum != sum {
		return fmt.Errorf("%w: %s holds other bytes (crc32c %08x, not %08x)", block.ErrNotFound, key, info.Sum, sum)
	}
	return t.Delete(ctx, key)
}
