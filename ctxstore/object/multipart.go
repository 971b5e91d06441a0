package object

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Multipart uploads. An upload is a record under the reserved key
// "\x00upload\x00<id>" holding the object key, the headers given at
// creation and the time it began; each uploaded part is a record under
// "\x00part\x00<id>\x00<number>" whose value is a one-segment manifest (its
// size, MD5 ETag and data blocks). Completing an upload writes the object's
// manifest naming the listed parts' segments (no byte is copied), then drops
// the part and upload records; parts not listed are retired. An upload left
// alone is aborted by SweepUploads once older than its TTL.

// S3's multipart limits.
const (
	// MaxParts is the highest part number and the most parts an upload may complete.
	MaxParts = 10000
	// MinPartSize is the least size of every part but the last.
	MinPartSize = 5 << 20
)

var (
	// ErrNoSuchUpload: the upload id names no upload in progress.
	ErrNoSuchUpload = fmt.Errorf("%w: no such upload", block.ErrNotFound)
	// ErrInvalidPart: a listed part was not uploaded or its ETag differs.
	ErrInvalidPart = fmt.Errorf("%w: invalid part", block.ErrInvalidArgument)
	// ErrInvalidPartOrder: the part list is not in ascending order.
	ErrInvalidPartOrder = fmt.Errorf("%w: parts not in ascending order", block.ErrInvalidArgument)
	// ErrEntityTooSmall: a part other than the last is below MinPartSize.
	ErrEntityTooSmall = fmt.Errorf("%w: part below the minimum size", block.ErrInvalidArgument)
)

// Upload is a multipart upload in progress.
type Upload struct {
	ID        string
	Key       string
	Initiated time.Time
	Headers   []Header
	// Hints are the upload's agent hints (hints.go): the parts' data blocks
	// and the completed object's manifest are put with them.
	Hints block.PutOptions
}

// Part is an uploaded part.
type Part struct {
	Number int
	Meta
}

// Upload record formats: uploadMagicHints is followed by the same fields
// as uploadMagic, then the hints. An upload without hints is written in
// the first format, which nodes that predate hints read too.
const (
	uploadMagic      = "CTXU\x01"
	uploadMagicHints = "CTXU\x02"
)

func uploadKey(id string) []byte { return []byte(reservedPrefix + "upload\x00" + id) }

func partKey(id string, n int) []byte {
	return []byte(reservedPrefix + "part\x00" + id + "\x00" + strconv.Itoa(n))
}

func (u Upload) encode() []byte {
	magic := uploadMagic
	if u.Hints.HasHints() {
		magic = uploadMagicHints
	}
	b := appendStr([]byte(magic), u.Key)
	b = binary.AppendVarint(b, u.Initiated.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(u.Headers)))
	for _, h := range u.Headers {
		b = appendStr(appendStr(b, h.Name), h.Value)
	}
	if u.Hints.HasHints() {
		b = appendHints(b, u.Hints)
	}
	return b
}

func decodeUpload(id string, b []byte) (Upload, error) {
	if len(b) < len(uploadMagic) || (string(b[:len(uploadMagic)]) != uploadMagic && string(b[:len(uploadMagic)]) != uploadMagicHints) {
		return Upload{}, fmt.Errorf("%w: record is not an upload", block.ErrInvalidArgument)
	}
	hinted := string(b[:len(uploadMagic)]) == uploadMagicHints
	r := &reader{b: b[len(uploadMagic):]}
	u := Upload{ID: id, Key: r.str("key")}
	u.Initiated = time.Unix(0, r.varint("time")).UTC()
	nh := r.uvarint("header count", maxHeaders)
	for i := uint64(0); i < nh && r.err == nil; i++ {
		u.Headers = append(u.Headers, Header{Name: r.str("header name"), Value: r.str("header value")})
	}
	if hinted {
		u.Hints = readHints(r)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return u, r.err
}

// validUploadID reports whether id has the form CreateUpload issues (16 hex
// digits), so a client's id can never name another record.
func validUploadID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := strconv.ParseUint(id, 16, 64)
	return err == nil && strings.ToLower(id) == id
}

// CreateUpload begins a multipart upload of key with the given headers and
// agent hints (only hints' Reuse, Retain and Session are kept; invalid ones
// are block.ErrInvalidArgument and create nothing) and returns it.
func (s *Store) CreateUpload(ctx context.Context, ns string, key []byte, headers []Header, hints block.PutOptions) (Upload, error) {
	n, err := s.objectNamespace(ns, key)
	if err != nil {
		return Upload{}, err
	}
	h, err := agentHints(hints)
	if err != nil {
		return Upload{}, err
	}
	u := Upload{ID: fmt.Sprintf("%016x", rand.Uint64()), Key: string(key), Initiated: s.now().UTC(), Headers: headers, Hints: h}
	value := u.encode()
	if ok, err := s.replace(ctx, n, uploadKey(u.ID), func(cur *record) ([]byte, time.Time, bool, error) {
		return value, time.Time{}, cur == nil, nil
	}, nil, true); err != nil {
		return Upload{}, err
	} else if !ok {
		return Upload{}, fmt.Errorf("%w: upload id %s taken; retry", block.ErrUnavailable, u.ID)
	}
	return u, nil
}

// upload reads upload id of namespace n at lvl.
func (s *Store) upload(ctx context.Context, n block.Namespace, id string, lvl ctxstore.ReadLevel) (Upload, error) {
	if !validUploadID(id) {
		return Upload{}, fmt.Errorf("%w: %q", ErrNoSuchUpload, id)
	}
	uk := uploadKey(id)
	p, err := s.readPair(ctx, n, s.slotKeys(n, uk), lvl)
	if err != nil {
		return Upload{}, err
	}
	v, err := s.take(&p, uk)
	if errors.Is(err, block.ErrNotFound) {
		return Upload{}, fmt.Errorf("%w: %q", ErrNoSuchUpload, id)
	}
	if err != nil {
		return Upload{}, err
	}
	defer v.Release()
	return decodeUpload(id, v.Data)
}

// GetUpload returns upload id of namespace ns, or ErrNoSuchUpload, read at
// lvl.
func (s *Store) GetUpload(ctx context.Context, ns, id string, lvl ctxstore.ReadLevel) (Upload, error) {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return Upload{}, err
	}
	return s.upload(ctx, n, id, lvl)
}

// UploadPart stores part number num of upload id from body (at most limit
// bytes), replacing an earlier upload of the same number, and returns the
// part's metadata (its ETag is the MD5 of its bytes).
func (s *Store) UploadPart(ctx context.Context, ns, id string, num int, body io.Reader, limit int64) (Meta, error) {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return Meta{}, err
	}
	if num < 1 || num > MaxParts {
		return Meta{}, fmt.Errorf("%w: part number %d outside 1..%d", block.ErrInvalidArgument, num, MaxParts)
	}
	u, err := s.upload(ctx, n, id, ctxstore.ReadLocal)
	if err != nil {
		return Meta{}, err
	}
	seg, sum, err := s.writeSegment(ctx, n, body, limit, u.Hints)
	if err != nil {
		return Meta{}, err
	}
	// Even an empty part keeps its (blockless) segment: an object's
	// segments map one to one onto its parts (Object.PartRange).
	m := manifest{Meta: Meta{Size: seg.Size, ETag: `"` + hex.EncodeToString(sum) + `"`, Modified: s.now().UTC()}, Segments: []Segment{seg}}
	if err := s.swapManifest(ctx, n, partKey(id, num), m, false, "", block.PutOptions{}); err != nil {
		_ = s.retire(context.WithoutCancel(ctx), n.Name, m.Segments)
		return Meta{}, err
	}
	return m.Meta, nil
}

// parts returns the uploaded parts of upload id in number order. Part
// records are found by probing each number's slot in the index (no scan),
// read at lvl (one sync for them all at ctxstore.ReadLinearizable).
func (s *Store) parts(ctx context.Context, n block.Namespace, id string, lvl ctxstore.ReadLevel) ([]Part, []manifest, error) {
	lvl, err := s.linearize(ctx, lvl)
	if err != nil {
		return nil, nil, err
	}
	var out []Part
	var ms []manifest
	for num := 1; num <= MaxParts; num++ {
		pk := partKey(id, num)
		if ok, err := s.present(ctx, n, pk); err != nil {
			return nil, nil, err
		} else if !ok {
			continue
		}
		m, err := s.manifest(ctx, n, pk, lvl)
		if errors.Is(err, block.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, Part{Number: num, Meta: m.Meta})
		ms = append(ms, m)
	}
	return out, ms, nil
}

// ListParts returns upload id and its uploaded parts in number order, read
// at lvl (one sync at ctxstore.ReadLinearizable).
func (s *Store) ListParts(ctx context.Context, ns, id string, lvl ctxstore.ReadLevel) (Upload, []Part, error) {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return Upload{}, nil, err
	}
	if lvl, err = s.linearize(ctx, lvl); err != nil {
		return Upload{}, nil, err
	}
	u, err := s.upload(ctx, n, id, lvl)
	if err != nil {
		return Upload{}, nil, err
	}
	ps, _, err := s.parts(ctx, n, id, lvl)
	return u, ps, err
}

// CompletedPart is one entry of a CompleteMultipartUpload's part list.
type CompletedPart struct {
	Number int
	ETag   string
}

// CompleteUpload assembles upload id's listed parts into its object and
// returns the object's metadata: ETag "<md5 of the parts' MD5s>-N". The
// list must be in ascending order (ErrInvalidPartOrder), name uploaded
// parts with their ETags (ErrInvalidPart), and every part but the last must
// be at least MinPartSize (ErrEntityTooSmall); on any of these, or when
// ifAbsent and the object exists (ErrPreconditionFailed), nothing changes
// and the upload stays open.
func (s *Store) CompleteUpload(ctx context.Context, ns, id string, list []CompletedPart, ifAbsent bool) (Meta, error) {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return Meta{}, err
	}
	if len(list) == 0 || len(list) > MaxParts {
		return Meta{}, fmt.Errorf("%w: a completion lists 1..%d parts, not %d", ErrInvalidPart, MaxParts, len(list))
	}
	u, err := s.upload(ctx, n, id, ctxstore.ReadLocal)
	if errors.Is(err, ErrNoSuchUpload) {
		// Completed already (by this client before, or by another at once).
		if _, m, derr := s.completed(ctx, n, id, ctxstore.ReadLocal); derr == nil {
			return m, nil
		}
	}
	if err != nil {
		return Meta{}, err
	}
	for i := 1; i < len(list); i++ {
		if list[i].Number <= list[i-1].Number {
			return Meta{}, fmt.Errorf("%w: part %d after part %d", ErrInvalidPartOrder, list[i].Number, list[i-1].Number)
		}
	}
	// The parts as every acknowledged upload left them (one sync); the
	// reads after it answer from this node's view, current by then.
	all, ms, err := s.parts(ctx, n, id, ctxstore.ReadLinearizable)
	if err != nil {
		return Meta{}, err
	}
	byNum := make(map[int]int, len(all))
	for i, p := range all {
		byNum[p.Number] = i
	}
	obj := manifest{Meta: Meta{Modified: s.now().UTC(), Parts: len(list), Headers: u.Headers}}
	sums := md5.New()
	used := make(map[int]bool, len(list))
	for i, c := range list {
		j, ok := byNum[c.Number]
		if !ok {
			// A completion of this upload running alongside may have
			// dropped the part records after it recorded its success.
			if _, m, derr := s.completed(ctx, n, id, ctxstore.ReadLocal); derr == nil {
				return m, nil
			}
			return Meta{}, fmt.Errorf("%w: part %d was not uploaded", ErrInvalidPart, c.Number)
		}
		if !etagMatches(c.ETag, all[j].ETag) || c.ETag == "*" {
			return Meta{}, fmt.Errorf("%w: part %d has ETag %s, not %s", ErrInvalidPart, c.Number, all[j].ETag, c.ETag)
		}
		if i < len(list)-1 && all[j].Size < MinPartSize {
			return Meta{}, fmt.Errorf("%w: part %d is %d bytes, below %d", ErrEntityTooSmall, c.Number, all[j].Size, MinPartSize)
		}
		raw, _ := hex.DecodeString(strings.Trim(all[j].ETag, `"`))
		sums.Write(raw)
		obj.Size += all[j].Size
		obj.Segments = append(obj.Segments, ms[j].Segments...)
		used[c.Number] = true
	}
	obj.ETag = fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(sums.Sum(nil)), len(list))
	if err := s.swapManifest(ctx, n, []byte(u.Key), obj, ifAbsent, "", u.Hints); err != nil {
		return Meta{}, err
	}
	// The object owns the listed parts' blocks now: drop their records
	// without retiring them; retire the parts left out. The completion is
	// recorded first, so that a completion of the same upload that finds
	// the records gone answers this success (completed.go).
	bg := context.WithoutCancel(ctx)
	_ = s.recordDone(bg, n, id, u.Key, obj.Meta) // without it a repeat answers NoSuchUpload
	for i, p := range all {
		_, _ = s.deleteKey(bg, n, partKey(id, p.Number), nil)
		if !used[p.Number] {
			_ = s.retire(bg, n.Name, ms[i].Segments)
		}
	}
	_, _ = s.deleteKey(bg, n, uploadKey(id), nil)
	return obj.Meta, nil
}

// AbortUpload drops upload id and retires its parts.
func (s *Store) AbortUpload(ctx context.Context, ns, id string) error {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return err
	}
	if _, err := s.upload(ctx, n, id, ctxstore.ReadLocal); err != nil {
		return err
	}
	return s.abort(ctx, n, id)
}

func (s *Store) abort(ctx context.Context, n block.Namespace, id string) error {
	all, _, err := s.parts(ctx, n, id, ctxstore.ReadLocal)
	if err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	retire := func(old []byte) {
		if om, err := decodeManifest(old); err == nil {
			_ = s.retire(bg, n.Name, om.Segments)
		}
	}
	for _, p := range all {
		if _, err := s.deleteKey(bg, n, partKey(id, p.Number), retire); err != nil {
			return err
		}
	}
	_, err = s.deleteKey(bg, n, uploadKey(id), nil)
	return err
}

// ListUploads returns the uploads in progress in namespace ns whose object
// keys start with prefix, sorted by key and then initiation time, read at
// lvl.
func (s *Store) ListUploads(ctx context.Context, ns, prefix string, lvl ctxstore.ReadLevel) ([]Upload, error) {
	if _, err := s.objectNamespace(ns, nil); err != nil {
		return nil, err
	}
	out, _, err := s.scanUploads(ctx, ns, prefix, lvl)
	return out, err
}

// scanUploads reads every record of namespace ns (one walk, at lvl) and
// returns the uploads in progress whose keys start with prefix, sorted as
// ListUploads says, and the completion records (upload id → when it
// completed).
func (s *Store) scanUploads(ctx context.Context, ns, prefix string, lvl ctxstore.ReadLevel) ([]Upload, map[string]time.Time, error) {
	out, done, _, err := s.scanRecords(ctx, ns, prefix, -1, lvl)
	return out, done, err
}

// scanRecords is scanUploads that also gathers (up to retireBatch) the ids
// of the retire records due with grace wait (none when wait is negative).
func (s *Store) scanRecords(ctx context.Context, ns, prefix string, wait time.Duration, lvl ctxstore.ReadLevel) ([]Upload, map[string]time.Time, []string, error) {
	var out []Upload
	var retired []string
	done := map[string]time.Time{}
	pre := uploadKey("")
	now := s.now()
	err := s.walk(ctx, ns, func(key, value []byte) error {
		if wait >= 0 && dueRetire(key, value, now, wait, &retired) {
			return nil
		}
		if id, ok := doneID(key); ok {
			if _, m, err := decodeDone(value); err == nil {
				done[id] = m.Modified
			}
			return nil
		}
		id, ok := strings.CutPrefix(string(key), string(pre))
		if !ok {
			return nil
		}
		if u, err := decodeUpload(id, value); err == nil && strings.HasPrefix(u.Key, prefix) {
			out = append(out, u)
		}
		return nil
	}, lvl)
	slices.SortFunc(out, func(a, b Upload) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return a.Initiated.Compare(b.Initiated)
	})
	return out, done, retired, err
}

// SweepUploads aborts the uploads of namespace ns begun more than ttl ago
// and returns how many it aborted; it also deletes the records of uploads
// completed more than Config.CompletedTTL (or ttl, when shorter: 0 before
// a bucket is deleted) ago, and the data blocks of replaced and deleted
// objects retired more than Config.RetireGrace (or ttl, when shorter) ago
// with their retire records (retired.go).
func (s *Store) SweepUploads(ctx context.Context, ns string, ttl time.Duration) (int, error) {
	n, err := s.objectNamespace(ns, nil)
	if err != nil {
		return 0, err
	}
	wait := min(ttl, s.cfg.RetireGrace)
	ups, finished, retired, err := s.scanRecords(ctx, ns, "", wait, ctxstore.ReadLocal)
	if err != nil {
		return 0, err
	}
	if _, err := s.sweepRetired(ctx, n, retired, wait); err != nil {
		return 0, err
	}
	if err := s.sweepDone(ctx, n, finished, min(ttl, s.cfg.CompletedTTL)); err != nil {
		return 0, err
	}
	cut, done := s.now().Add(-ttl), 0
	for _, u := range ups {
		if u.Initiated.Before(cut) {
			if err := s.abort(ctx, n, u.ID); err != nil {
				return done, err
			}
			done++
		}
	}
	return done, nil
}
