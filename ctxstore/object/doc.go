// Package object maps arbitrary binary keys onto ctxtier's immutable,
// content-addressed blocks, for the surfaces whose clients name values
// themselves (RESP today; S3-style object keys next).
//
// A key lives in one namespace. Its records live in one of two blocks of
// the namespace (the key's "slots"): slot 0, whose 64-bit hash is xxh3 of
// the key seeded by the namespace's tenant salt, and slot 1, the same hash
// with its lowest bit flipped. A record is a small header (with a
// generation counter), the key itself and the value, so two keys whose
// hashes collide are told apart (the second one's Set fails with
// ErrKeyCollision and the first one's bytes are never returned for it) and
// listings return real key names. Records written before generations
// existed (format 1, always in slot 0) read as generation 0.
//
// Blocks are immutable, and a replace (Set of a key that holds a value, a
// PUT, Complete or Copy onto an existing S3 key) is one step from a
// reader's view: the writer puts the next generation into the slot the
// current record is not in, and only once that put is acknowledged deletes
// the old record with a delete conditioned on its bytes
// (ctxstore.Store.DeleteIf), so it never removes a newer one. A reader
// looks up both slots and takes the record of the key with the higher
// generation; at every moment one of the two holds a whole version, so it
// sees the old value or the new one, never a miss and never a mix. Racing
// writers of one key all succeed and the last to land wins: a put into an
// occupied slot is a conflict, and the loser reads both slots again. A
// writer that finds both slots holding the key (another writer between its
// put and its delete, or one that stopped there) first deletes the lower
// generation. The writer whose delete removed a record retires what it
// names (an S3 manifest's data blocks), so each old version is retired
// exactly once. Delete removes the lower generation first, then the higher,
// so an older value never comes back. A writer with a condition reads the
// slots at the linearizable level; a plain one reads its node's own view
// and, after its put, checks there that its generation won (see replace).
//
// Every public method that only reads (Get, GetIn, Exists, Scan, Count,
// StatObject, OpenObject, ListObjects, GetUpload, ListParts, ListUploads,
// CompletedUpload) takes its read level from its caller, as its last
// parameter (a ctxstore.ReadLevel: the level is all a read here takes
// from ctxstore.ReadOptions), and hands it down explicitly through the
// helpers; the package reads no level from a context. The writes read
// their node's view (ctxstore.ReadLocal) except where they must not: a
// conditional write, a replace's retry and a multipart completion's part
// list are read at ctxstore.ReadLinearizable, passed explicitly.
//
// Expiry (a Redis TTL) is kept in the record's header and also handed to the
// tiers, which drop the block when it lapses; a reader treats a record past
// its expiry as absent even before the tiers drop it. Expiry applies to the
// winning record only: an expired newer record hides an older live one.
package object
