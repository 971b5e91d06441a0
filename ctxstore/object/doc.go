// Package object maps arbitrary binary keys onto ctxtier's immutable,
// content-addressed blocks, for the surfaces whose clients name values
// themselves (RESP today; S3-style object keys next).
//
// A key lives in one namespace. Its block is the namespace's block whose
// 64-bit hash is xxh3 of the key seeded by the namespace's tenant salt (the
// key's "slot"). The block holds a record: a small header, the key itself
// and the value, so two keys whose hashes collide are told apart (the second
// one's Set fails with ErrKeyCollision and the first one's bytes are never
// returned for it) and listings return real key names.
//
// Blocks are immutable; Set of a key that holds other bytes replaces them by
// deleting the old record and putting the new one, in that order, through
// the Store. In a cluster both steps are Raft commits, so every node applies
// them in the same order and ends on the same value; between the two a
// reader sees the key as absent (a miss), never a mix of old and new bytes.
// Concurrent Sets of one key end with one of the values (the last to put).
//
// Expiry (a Redis TTL) is kept in the record's header and also handed to the
// tiers, which drop the block when it lapses; a reader treats a record past
// its expiry as absent even before the tiers drop it.
package object
