package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// CommandType is the first byte of every command (low 7 bits).
type CommandType uint8

// Command types.
const (
	// CmdIndex carries a batch of index operations: one log entry, many blocks.
	CmdIndex CommandType = 1
	// CmdMember adds, updates or removes a member.
	CmdMember CommandType = 2
	// CmdNamespace creates, updates or deletes a namespace.
	CmdNamespace CommandType = 3
	// CmdCredential stores or deletes a credential.
	CmdCredential CommandType = 4
	// CmdIncarnation records a member's start (its incarnation) and whether
	// it is still restoring the shards the index places on it. It is always
	// written with FlagIgnoreUnknown: an older FSM skips it.
	CmdIncarnation CommandType = 5
)

// FlagIgnoreUnknown, set in a command's (or an index operation's) first byte,
// tells an FSM that does not know the type to skip it instead of failing.
// A newer leader sets it on additions that older replicas may safely ignore.
const FlagIgnoreUnknown = 0x80

// CommandVersion is the encoding version this package writes and reads.
const CommandVersion = 1

// ErrUnknownCommand is the (wrapped) error for a command or operation type,
// or a version, this FSM does not know and was not told to ignore.
var ErrUnknownCommand = errors.New("fsm: unknown command type")

// OpKind is the kind of one index operation.
type OpKind uint8

// Index operation kinds.
const (
	// OpPut adds an entry; an existing key with the same checksum is a no-op
	// (existed), with another checksum a conflict.
	OpPut OpKind = 1
	// OpDelete removes an entry, optionally only if it has IfGeneration.
	OpDelete OpKind = 2
	// OpPin extends an entry's pin to PinUntil (never shortens it).
	OpPin OpKind = 3
	// OpPlace replaces an existing entry's placement (repair moved shards),
	// provided its checksum matches and, when the op carries IfPlacement,
	// its placement is still that one.
	OpPlace OpKind = 4
)

// Op is one index operation. Which fields matter depends on Kind.
type Op struct {
	Kind OpKind
	Key  block.Key
	// Put: all of these. Place: Sum and Placement.
	Size      int64
	Sum       uint32
	Placement []Shard
	TierHints TierHints
	Created   time.Time
	// Put and Pin: the pin expiry (zero for none on a put).
	PinUntil time.Time
	// Delete: when non-zero, delete only the entry of this generation.
	IfGeneration uint64
	// Place: when non-zero, the time the writer began writing the new
	// shards; those on members that started later are dropped (see
	// dropStale). Zero (entries written before the field existed): no check.
	Written time.Time
	// Place: when non-nil, the placement the writer read: the op applies
	// only to an entry whose placement is still exactly this one, else it
	// is a conflict, unless the entry's placement is already Placement (a
	// retry of this change after its answer was lost: idempotent). A
	// writer that lost the lead while it copied shards must not overwrite
	// a newer leader's placement with one planned from the older entry (it
	// would name copies the newer writer deleted).
	// Nil (entries written before the field existed): no check.
	IfPlacement []Shard
}

// PutOp builds the put of key with e's fields (e.Generation is ignored: the
// log index decides it).
func PutOp(key block.Key, e Entry) Op {
	return Op{Kind: OpPut, Key: key, Size: e.Size, Sum: e.Sum, Placement: e.Placement, TierHints: e.TierHints, Created: e.Created, PinUntil: e.PinUntil}
}

// DeleteOp builds the delete of key; ifGeneration 0 deletes whatever is there.
func DeleteOp(key block.Key, ifGeneration uint64) Op {
	return Op{Kind: OpDelete, Key: key, IfGeneration: ifGeneration}
}

// PinOp builds a pin of key until the given time.
func PinOp(key block.Key, until time.Time) Op { return Op{Kind: OpPin, Key: key, PinUntil: until} }

// PlaceOp builds a placement change of key (whose checksum must be sum).
func PlaceOp(key block.Key, sum uint32, placement []Shard) Op {
	return Op{Kind: OpPlace, Key: key, Sum: sum, Placement: placement}
}

// WrittenPlaceOp builds a placement change whose new shards were written
// from the time written on (taken before the first write).
func WrittenPlaceOp(key block.Key, sum uint32, placement []Shard, written time.Time) Op {
	return Op{Kind: OpPlace, Key: key, Sum: sum, Placement: placement, Written: written}
}

// MovePlaceOp builds a placement change from placement from (the one the
// writer read; the change applies only while the entry still has it) to
// placement to, whose new shards were written from the time written on.
func MovePlaceOp(key block.Key, sum uint32, from, to []Shard, written time.Time) Op {
	return Op{Kind: OpPlace, Key: key, Sum: sum, Placement: to, Written: written, IfPlacement: from}
}

// Validate checks an operation without looking at the state.
func (o Op) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s %s: %s", block.ErrInvalidArgument, o.Kind, o.Key, fmt.Sprintf(format, a...))
	}
	if err := block.ValidNamespaceName(o.Key.Namespace); err != nil {
		return err
	}
	if o.Key.Shard != 0 {
		return bad("the index holds whole blocks, not shard %d", o.Key.Shard)
	}
	switch o.Kind {
	case OpPut:
		if o.Size < block.MinBlockSize || o.Size > block.HardMaxBlockSize {
			return bad("size %d out of range", o.Size)
		}
		fallthrough
	case OpPlace:
		if len(o.Placement) == 0 || len(o.Placement) > 256 {
			return bad("placement needs 1..256 shards, has %d", len(o.Placement))
		}
		for _, s := range o.Placement {
			if s.NodeID == "" {
				return bad("shard %d has no node", s.Index)
			}
		}
		if o.Kind == OpPlace && o.IfPlacement != nil {
			if len(o.IfPlacement) == 0 || len(o.IfPlacement) > 256 {
				return bad("expected placement needs 1..256 shards, has %d", len(o.IfPlacement))
			}
			if slices.ContainsFunc(o.IfPlacement, func(s Shard) bool { return s.NodeID == "" }) {
				return bad("an expected shard has no node")
			}
		}
	case OpDelete, OpPin:
	default:
		return fmt.Errorf("%w: op kind %d", ErrUnknownCommand, o.Kind)
	}
	return nil
}

// String names the kind.
func (k OpKind) String() string {
	switch k {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpPin:
		return "pin"
	case OpPlace:
		return "place"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// MemberAction says what a member command does.
type MemberAction uint8

// Member actions.
const (
	MemberUpsert   MemberAction = 1 // add or replace the record
	MemberSetState MemberAction = 2 // change one member's state
	MemberRemove   MemberAction = 3 // forget the member
)

// MemberCommand is the body of CmdMember.
type MemberCommand struct {
	Action MemberAction
	Member Member // upsert: the record; set-state/remove: ID (and State)
}

// NamespaceAction says what a namespace command does.
type NamespaceAction uint8

// Namespace actions.
const (
	NamespaceCreate NamespaceAction = 1
	NamespaceUpdate NamespaceAction = 2
	NamespaceDelete NamespaceAction = 3
)

// NamespaceCommand is the body of CmdNamespace.
type NamespaceCommand struct {
	Action    NamespaceAction
	Namespace block.Namespace // delete: Name only
}

// CredentialAction says what a credential command does.
type CredentialAction uint8

// Credential actions.
const (
	CredentialPut    CredentialAction = 1
	CredentialDelete CredentialAction = 2
)

// CredentialCommand is the body of CmdCredential.
type CredentialCommand struct {
	Action     CredentialAction
	Credential Credential // delete: AccessKeyID only
}

// Command is a decoded log entry.
type Command struct {
	Type          CommandType
	IgnoreUnknown bool
	Ops           []Op // CmdIndex; an unknown op flagged ignore-unknown has Kind 0
	Member        MemberCommand
	Namespace     NamespaceCommand
	Credential    CredentialCommand
	Incarnation   IncarnationCommand
}

// IncarnationCommand is the body of CmdIncarnation: member ID started as
// Incarnation (a number each start makes larger than the last, a clock
// reading), and is (Restoring) or is no longer restoring its shards.
type IncarnationCommand struct {
	ID          string
	Incarnation uint64
	Restoring   bool
}

// EncodeIncarnation encodes a CmdIncarnation command (flagged
// ignore-unknown).
func EncodeIncarnation(c IncarnationCommand) []byte {
	e := encoder{b: []byte{byte(CmdIncarnation) | FlagIgnoreUnknown, CommandVersion}}
	e.str(c.ID)
	e.uvarint(c.Incarnation)
	e.bool(c.Restoring)
	return e.b
}

func header(t CommandType) []byte { return []byte{byte(t), CommandVersion} }

// AppendOp appends one encoded index operation to dst: kind byte, body
// length, body. The batcher encodes each caller's operations this way and
// joins them with EncodeIndexEncoded.
func AppendOp(dst []byte, o Op) []byte {
	// The body is encoded in place after one byte kept for its length
	// (the common case: under 128 bytes), not in a buffer of its own.
	dst = append(dst, uint8(o.Kind), 0)
	start := len(dst)
	body := encoder{b: dst}
	body.key(o.Key)
	switch o.Kind {
	case OpPut:
		body.varint(o.Size)
		body.u32(o.Sum)
		body.shards(o.Placement)
		body.u8(uint8(o.TierHints))
		body.time(o.PinUntil)
		body.time(o.Created)
	case OpDelete:
		body.uvarint(o.IfGeneration)
	case OpPin:
		body.time(o.PinUntil)
	case OpPlace:
		body.u32(o.Sum)
		body.shards(o.Placement)
		// Optional trailing fields: absent (not a zero) when unset, so
		// entries logged before they existed decode unchanged. The written
		// time is there when either is set (a zero one only before an
		// expected placement).
		if !o.Written.IsZero() || o.IfPlacement != nil {
			body.time(o.Written)
		}
		if o.IfPlacement != nil {
			body.shards(o.IfPlacement)
		}
	}
	return placeLength(body.b, start)
}

// placeLength writes the length of b[start:] as the uvarint that precedes
// it, in the one byte kept at b[start-1], moving the body up when the
// length needs more bytes.
func placeLength(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	var lb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lb[:], uint64(n))
	b = append(b, lb[:k-1]...) // room for the longer length
	copy(b[start+k-1:], b[start:start+n])
	copy(b[start-1:], lb[:k])
	return b
}

// EncodeIndex encodes a CmdIndex command holding ops.
func EncodeIndex(ops []Op) []byte {
	var enc []byte
	for _, o := range ops {
		enc = AppendOp(enc, o)
	}
	return EncodeIndexEncoded(len(ops), enc)
}

// EncodeIndexEncoded builds a CmdIndex command from n operations already
// encoded back to back with AppendOp.
func EncodeIndexEncoded(n int, ops []byte) []byte {
	e := encoder{b: make([]byte, 0, len(ops)+12)}
	e.b = append(e.b, header(CmdIndex)...)
	e.uvarint(uint64(n))
	e.b = append(e.b, ops...)
	return e.b
}

// EncodeMember encodes a CmdMember command.
func EncodeMember(c MemberCommand) []byte {
	e := encoder{b: header(CmdMember)}
	e.u8(uint8(c.Action))
	m := c.Member
	switch c.Action {
	case MemberUpsert:
		e.member(m)
	case MemberSetState:
		e.str(m.ID)
		e.u8(uint8(m.State))
	default:
		e.str(m.ID)
	}
	return e.b
}

// EncodeNamespace encodes a CmdNamespace command.
func EncodeNamespace(c NamespaceCommand) []byte {
	e := encoder{b: header(CmdNamespace)}
	e.u8(uint8(c.Action))
	if c.Action == NamespaceDelete {
		e.str(c.Namespace.Name)
	} else {
		e.namespace(c.Namespace)
	}
	return e.b
}

// EncodeCredential encodes a CmdCredential command.
func EncodeCredential(c CredentialCommand) []byte {
	e := encoder{b: header(CmdCredential)}
	e.u8(uint8(c.Action))
	if c.Action == CredentialDelete {
		e.str(c.Credential.AccessKeyID)
	} else {
		e.credential(c.Credential)
	}
	return e.b
}

// DecodeCommand decodes a log entry. Malformed input is ErrMalformed; a type
// or version this package does not know is ErrUnknownCommand, with
// c.IgnoreUnknown telling whether the sender allowed skipping it.
func DecodeCommand(b []byte) (c Command, err error) {
	return decodeCommandInto(b, true, nil)
}

// decodeCommand is DecodeCommand; with arena, an index command's
// placements come from shared chunks (shardArena) rather than one
// allocation each (the benchmark compares both).
func decodeCommand(b []byte, arena bool) (c Command, err error) {
	return decodeCommandInto(b, arena, nil)
}

// decodeCommandInto is decodeCommand appending an index command's ops to
// ops[:0] (the FSM's reused buffer; nil allocates one).
func decodeCommandInto(b []byte, arena bool, ops []Op) (c Command, err error) {
	d := decoder{b: b}
	first := d.u8()
	c.Type = CommandType(first &^ FlagIgnoreUnknown)
	c.IgnoreUnknown = first&FlagIgnoreUnknown != 0
	ver := d.u8()
	if d.err != nil {
		return c, d.err
	}
	if c.Type < CmdIndex || c.Type > CmdIncarnation {
		return c, fmt.Errorf("%w: %d", ErrUnknownCommand, c.Type)
	}
	if ver != CommandVersion {
		return c, fmt.Errorf("%w: type %d version %d", ErrUnknownCommand, c.Type, ver)
	}
	switch c.Type {
	case CmdIndex:
		d.last = new([2]string)
		n := d.count(2)
		if arena {
			// A chunk holds one shard per op (at most 512): one copy's
			// placement; placements of more shards take more chunks.
			d.shardArena = &shardArena{chunk: min(max(n, 16), 512)}
		}
		if cap(ops) >= n {
			c.Ops = ops[:0]
		} else {
			c.Ops = make([]Op, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			c.Ops = append(c.Ops, d.op())
		}
	case CmdMember:
		c.Member.Action = MemberAction(d.u8())
		switch c.Member.Action {
		case MemberUpsert:
			c.Member.Member = d.member()
		case MemberSetState:
			c.Member.Member.ID = d.str()
			c.Member.Member.State = MemberState(d.u8())
		case MemberRemove:
			c.Member.Member.ID = d.str()
		default:
			d.fail("member action %d", c.Member.Action)
		}
	case CmdNamespace:
		c.Namespace.Action = NamespaceAction(d.u8())
		switch c.Namespace.Action {
		case NamespaceCreate, NamespaceUpdate:
			c.Namespace.Namespace = d.namespace()
		case NamespaceDelete:
			c.Namespace.Namespace.Name = d.str()
		default:
			d.fail("namespace action %d", c.Namespace.Action)
		}
	case CmdCredential:
		c.Credential.Action = CredentialAction(d.u8())
		switch c.Credential.Action {
		case CredentialPut:
			c.Credential.Credential = d.credential()
		case CredentialDelete:
			c.Credential.Credential.AccessKeyID = d.str()
		default:
			d.fail("credential action %d", c.Credential.Action)
		}
	case CmdIncarnation:
		if !c.IgnoreUnknown {
			// EncodeIncarnation always flags it: a second encoding.
			d.fail("incarnation command without the ignore-unknown flag")
			break
		}
		c.Incarnation = IncarnationCommand{ID: d.str(), Incarnation: d.uvarint(), Restoring: d.bool()}
	}
	return c, d.done()
}

// op decodes one index operation. An unknown kind flagged ignore-unknown
// decodes to an Op with Kind 0 (skipped when applied); unflagged, it fails.
func (d *decoder) op() Op {
	first := d.u8()
	body := d.rawBytes()
	if d.err != nil {
		return Op{}
	}
	kind := OpKind(first &^ FlagIgnoreUnknown)
	if kind < OpPut || kind > OpPlace {
		if first&FlagIgnoreUnknown != 0 {
			return Op{}
		}
		if d.err == nil {
			d.err = fmt.Errorf("%w: index op kind %d", ErrUnknownCommand, kind)
		}
		return Op{}
	}
	if first&FlagIgnoreUnknown != 0 {
		// AppendOp never flags an op this package knows: a second encoding.
		d.fail("index op kind %d flagged ignore-unknown", kind)
		return Op{}
	}
	b := decoder{b: body, last: d.last, shardArena: d.shardArena}
	o := Op{Kind: kind, Key: b.key()}
	switch kind {
	case OpPut:
		o.Size = b.varint()
		o.Sum = b.u32()
		o.Placement = b.shards()
		o.TierHints = TierHints(b.u8())
		o.PinUntil = b.time()
		o.Created = b.time()
	case OpDelete:
		o.IfGeneration = b.uvarint()
	case OpPin:
		o.PinUntil = b.time()
	case OpPlace:
		o.Sum = b.u32()
		o.Placement = b.shards()
		if b.err == nil && b.remaining() > 0 {
			o.Written = b.time()
			if b.err == nil && b.remaining() > 0 {
				if o.IfPlacement = b.shards(); o.IfPlacement == nil && b.err == nil {
					b.fail("empty expected placement (an unset one is absent)")
				}
			} else if o.Written.IsZero() && b.err == nil {
				b.fail("written time 0 (an unset time is absent)")
			}
		}
	}
	if err := b.done(); err != nil && d.err == nil {
		d.err = fmt.Errorf("op %s: %w", kind, err)
	}
	return o
}

func (e *encoder) key(k block.Key) {
	e.str(k.Namespace)
	e.u64(k.Hash)
	e.bool(k.HasPart)
	if k.HasPart {
		e.uvarint(uint64(k.Part))
	}
}

func (d *decoder) key() block.Key {
	k := block.Key{Namespace: d.cachedStr(0), Hash: d.u64(), HasPart: d.bool()}
	if k.HasPart {
		p := d.uvarint()
		if p > 0xffff {
			d.fail("part %d", p)
		}
		k.Part = uint16(p)
	}
	return k
}

func (e *encoder) shards(s []Shard) {
	e.uvarint(uint64(len(s)))
	for _, x := range s {
		e.str(x.NodeID)
		e.uvarint(uint64(x.Index))
	}
}

func (d *decoder) shards() []Shard {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	var out []Shard
	if d.shardArena != nil {
		out = d.shardArena.take(n)
	} else {
		out = make([]Shard, n)
	}
	for i := range out {
		out[i].NodeID = d.cachedStr(1)
		v := d.uvarint()
		if v > 0xffff {
			d.fail("shard index %d", v)
		}
		out[i].Index = uint16(v)
	}
	return out
}

// time encodes zero as 0 and anything else as Unix nanoseconds.
func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.varint(0)
		return
	}
	e.varint(t.UnixNano())
}

func (d *decoder) time() time.Time {
	v := d.varint()
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v).UTC()
}

func (e *encoder) namespace(n block.Namespace) {
	e.str(n.Name)
	e.str(n.Model)
	e.varint(int64(n.BlockTokens))
	e.str(string(n.HashScheme))
	e.str(n.TenantSalt)
	e.varint(n.MaxBlockSize)
	e.u8(n.Priority)
	e.varint(n.TTLSeconds)
	e.str(string(n.WriteMode))
	e.varint(int64(n.DataShards))
	e.varint(int64(n.ParityShards))
	// Optional trailing fields, so logs and snapshots written before they
	// existed still decode: first the kind, written only for a kind other
	// than block, or (empty) when extensions follow; then the extensions,
	// each a tag and a non-zero value, in ascending tag order. A namespace
	// with neither encodes exactly as before kinds existed.
	kind := n.Kind
	if kind == block.KindBlock {
		kind = ""
	}
	ext := nsExtensions(n)
	if kind == "" && len(ext) == 0 {
		return
	}
	e.str(string(kind))
	for _, x := range ext {
		e.u8(x.tag)
		switch x.tag {
		case nsExtVLLMHashSeed:
			e.str(n.VLLMHashSeed)
		case nsExtS3Disabled:
			// presence is the value
		default:
			e.uvarint(x.v)
		}
	}
}

// Namespace extension tags (see encoder.namespace). Never renumber.
const (
	nsExtVLLMHashSeed = 1 // string, non-empty
	nsExtS3Disabled   = 2 // no value: present means true
	nsExtS3TTL        = 3 // uvarint seconds, non-zero
	nsExtQuotaDRAM    = 4 // uvarint bytes, non-zero
	nsExtQuotaNVMe    = 5
	nsExtQuotaS3      = 6
	nsExtLast         = nsExtQuotaS3
)

type nsExt struct {
	tag uint8
	v   uint64
}

// nsExtensions lists n's set extension fields in tag order. Negative
// numbers are invalid namespaces (Validate) and are not written.
func nsExtensions(n block.Namespace) []nsExt {
	var out []nsExt
	if n.VLLMHashSeed != "" {
		out = append(out, nsExt{tag: nsExtVLLMHashSeed})
	}
	if n.S3Disabled {
		out = append(out, nsExt{tag: nsExtS3Disabled})
	}
	for _, f := range []struct {
		tag uint8
		v   int64
	}{{nsExtS3TTL, n.S3TTLSeconds}, {nsExtQuotaDRAM, n.Quota.DRAM}, {nsExtQuotaNVMe, n.Quota.NVMe}, {nsExtQuotaS3, n.Quota.S3}} {
		if f.v > 0 {
			out = append(out, nsExt{tag: f.tag, v: uint64(f.v)})
		}
	}
	return out
}

func (d *decoder) namespace() block.Namespace {
	n := block.Namespace{
		Name:         d.str(),
		Model:        d.str(),
		BlockTokens:  d.int(),
		HashScheme:   block.HashScheme(d.str()),
		TenantSalt:   d.str(),
		MaxBlockSize: d.varint(),
		Priority:     d.u8(),
		TTLSeconds:   d.varint(),
		WriteMode:    block.WriteMode(d.str()),
		DataShards:   d.int(),
		ParityShards: d.int(),
	}
	if d.err != nil || d.remaining() == 0 {
		return n
	}
	n.Kind = block.Kind(d.str())
	// The encoder spells a block namespace's kind as nothing, or as empty
	// when extensions follow: "block", or an empty kind with nothing after
	// it, is a second encoding of the same command and is refused, so
	// every command has one encoding.
	if d.err == nil && n.Kind == block.KindBlock {
		d.fail("namespace kind %q written out (a block namespace omits it)", n.Kind)
	}
	if d.err == nil && n.Kind == "" && d.remaining() == 0 {
		d.fail("empty namespace kind with no extension after it")
	}
	last := uint8(0)
	for d.err == nil && d.remaining() > 0 {
		tag := d.u8()
		if d.err != nil {
			break
		}
		if tag <= last || tag > nsExtLast {
			d.fail("namespace extension tag %d after %d", tag, last)
			break
		}
		last = tag
		switch tag {
		case nsExtVLLMHashSeed:
			if n.VLLMHashSeed = d.str(); d.err == nil && n.VLLMHashSeed == "" {
				d.fail("empty vllm_hash_seed written out")
			}
		case nsExtS3Disabled:
			n.S3Disabled = true
		default:
			v := d.uvarint()
			if d.err == nil && (v == 0 || v > math.MaxInt64) {
				d.fail("namespace extension %d: value %d out of range 1..%d", tag, v, int64(math.MaxInt64))
			}
			switch tag {
			case nsExtS3TTL:
				n.S3TTLSeconds = int64(v)
			case nsExtQuotaDRAM:
				n.Quota.DRAM = int64(v)
			case nsExtQuotaNVMe:
				n.Quota.NVMe = int64(v)
			case nsExtQuotaS3:
				n.Quota.S3 = int64(v)
			}
		}
	}
	return n
}

func (e *encoder) credential(c Credential) {
	e.str(c.AccessKeyID)
	e.u8(uint8(c.Kind))
	e.bytes(c.Secret)
	e.uvarint(uint64(len(c.Scopes)))
	for _, s := range c.Scopes {
		e.str(s.Namespace)
		e.u8(uint8(s.Perms))
	}
	e.bool(c.Disabled)
}

func (d *decoder) credential() Credential {
	c := Credential{AccessKeyID: d.str(), Kind: SecretKind(d.u8()), Secret: d.bytes()}
	n := d.count(2)
	if n > 0 {
		c.Scopes = make([]Scope, n)
		for i := range c.Scopes {
			c.Scopes[i] = Scope{Namespace: d.str(), Perms: Permission(d.u8())}
		}
	}
	c.Disabled = d.bool()
	return c
}

func (e *encoder) member(m Member) {
	e.str(m.ID)
	e.str(m.RaftAddr)
	e.str(m.DataAddr)
	e.str(m.HTTPAddr)
	e.str(m.Zone)
	e.varint(m.Capacity)
	e.u8(uint8(m.State))
}

func (d *decoder) member() Member {
	return Member{ID: d.str(), RaftAddr: d.str(), DataAddr: d.str(), HTTPAddr: d.str(), Zone: d.str(), Capacity: d.varint(), State: MemberState(d.u8())}
}
