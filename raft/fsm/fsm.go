package fsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Response is what Apply returns for one command (the value of a Raft
// ApplyFuture's Response on the node that proposed it).
type Response struct {
	// Index is the Raft log index of the command.
	Index uint64
	// Results has one element per operation of a CmdIndex command.
	Results []OpResult
	// Err is a command-level failure: a rejected member/namespace/credential
	// change (wrapping a block sentinel), or an undecodable command.
	Err error
	// Skipped is set when the command's type was unknown but flagged
	// ignore-unknown.
	Skipped bool
}

// state is one immutable version of everything replicated. Apply builds a new
// one and swaps it in; readers and snapshots hold whichever they loaded.
type state struct {
	// index holds each namespace's block entries (index.go); a namespace
	// with none has no tree.
	index map[string]*tree
	// nodeNames is the name table of the index's placements; nodeIDs,
	// its inverse, is the writer's alone (see intern).
	nodeNames []string
	nodeIDs   map[string]uint32
	// refs holds the placements' shards after the first (refarena.go).
	refs    refArena
	members map[string]Member
	// memberList is members sorted by id, shared by every reader of a
	// published state (Members); nil after members changed until publish
	// sorts it again, so a put's placement does not sort the members per
	// block.
	memberList []Member
	namespaces map[string]block.Namespace
	creds      map[string]Credential
	applied    uint64
}

func emptyState() *state {
	return &state{
		index:      map[string]*tree{},
		nodeIDs:    map[string]uint32{},
		members:    map[string]Member{},
		namespaces: map[string]block.Namespace{block.DefaultNamespace: block.DefaultNamespaceConfig()},
		creds:      map[string]Credential{},
	}
}

// FSM is the replicated state machine. It implements raft.FSM and
// raft.BatchingFSM; the read methods are safe for concurrent use and take no
// lock.
type FSM struct {
	log   *slog.Logger
	cur   atomic.Pointer[state]
	wmu   sync.Mutex // serialises Apply and Restore
	fault atomic.Pointer[faultErr]

	ops atomic.Uint64 // index operations applied, for metrics

	// opsBuf is the decoded ops of the index command being applied,
	// reused from one apply to the next (under wmu) so that an apply does
	// not allocate and zero its batch's ops (192 B each) every time.
	opsBuf []Op

	recent atomic.Pointer[recentPuts] // TrackPuts's record; nil while off

	// appliedMu guards appliedCh, which WaitApplied callers wait on and
	// publish closes (nil while nobody waits).
	appliedMu sync.Mutex
	appliedCh chan struct{}
}

type faultErr struct{ err error }

// New returns an FSM holding only the default namespace.
func New(log *slog.Logger) *FSM {
	if log == nil {
		log = slog.Default()
	}
	f := &FSM{log: log}
	f.cur.Store(emptyState())
	return f
}

// Fault returns the first hard apply error: a command of a type this FSM
// does not know, sent without the ignore-unknown flag, or an undecodable
// one. Such a node is running older code than its leader and must be
// upgraded; its state may lag the cluster's. Nil when all is well.
func (f *FSM) Fault() error {
	if p := f.fault.Load(); p != nil {
		return p.err
	}
	return nil
}

// OpsApplied counts index operations applied since start.
func (f *FSM) OpsApplied() uint64 { return f.ops.Load() }

// Apply applies one committed log entry.
func (f *FSM) Apply(l *hraft.Log) interface{} {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	s := f.cur.Load()
	ns := *s
	r := f.applyOne(&ns, l)
	f.publish(&ns)
	return r
}

// ApplyBatch applies consecutive committed log entries and publishes the
// resulting state once.
func (f *FSM) ApplyBatch(logs []*hraft.Log) []interface{} {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	s := f.cur.Load()
	ns := *s
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = f.applyOne(&ns, l)
	}
	f.publish(&ns)
	return out
}

// publish swaps in s and wakes WaitApplied callers. The caller holds wmu.
func (f *FSM) publish(s *state) {
	if s.memberList == nil {
		s.memberList = sortMembers(s.members)
	}
	f.cur.Store(s)
	f.appliedMu.Lock()
	if f.appliedCh != nil {
		close(f.appliedCh)
		f.appliedCh = nil
	}
	f.appliedMu.Unlock()
}

// WaitApplied blocks until the FSM has applied log index idx, or ctx ends
// (its error). It sleeps between applies: each apply or restore wakes it.
func (f *FSM) WaitApplied(ctx context.Context, idx uint64) error {
	for {
		f.appliedMu.Lock()
		if f.AppliedIndex() >= idx {
			f.appliedMu.Unlock()
			return nil
		}
		if f.appliedCh == nil {
			f.appliedCh = make(chan struct{})
		}
		ch := f.appliedCh
		f.appliedMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *FSM) applyOne(s *state, l *hraft.Log) interface{} {
	if l.Index > s.applied {
		s.applied = l.Index
	}
	if l.Type != hraft.LogCommand {
		return nil
	}
	return f.applyCommand(s, l.Index, l.Data)
}

// applyCommand decodes and applies data at log index idx onto s (a private
// copy of the current state whose maps are still shared: they are cloned
// before any change).
func (f *FSM) applyCommand(s *state, idx uint64, data []byte) *Response {
	r := &Response{Index: idx}
	c, err := decodeCommandInto(data, true, f.opsBuf)
	if err != nil {
		if errors.Is(err, ErrUnknownCommand) && c.IgnoreUnknown {
			r.Skipped = true
			f.log.Debug("skipping command of unknown type", "index", idx, "type", c.Type)
			return r
		}
		r.Err = fmt.Errorf("log index %d: %w", idx, err)
		f.fault.CompareAndSwap(nil, &faultErr{r.Err})
		f.log.Error("raft command cannot be applied; this node must be upgraded", "index", idx, "err", err)
		return r
	}
	switch c.Type {
	case CmdIndex:
		r.Results = f.applyIndex(s, idx, c.Ops)
		f.keepOps(c.Ops)
	case CmdMember:
		r.Err = applyMember(s, c.Member)
	case CmdNamespace:
		r.Err = applyNamespace(s, c.Namespace)
	case CmdCredential:
		r.Err = applyCredential(s, c.Credential)
	case CmdIncarnation:
		r.Err = applyIncarnation(s, c.Incarnation)
	}
	return r
}

// maxKeptOps caps the ops buffer an FSM keeps between applies: a rare
// huge command's buffer is left to the collector.
const maxKeptOps = 8192

// keepOps keeps ops's array for the next apply, cleared so that it holds
// no namespace strings or placements of applied commands. The caller holds
// wmu.
func (f *FSM) keepOps(ops []Op) {
	if cap(ops) > maxKeptOps {
		return
	}
	clear(ops)
	f.opsBuf = ops[:0]
}

// applyIncarnation records a member's incarnation and restoring flag. An
// older incarnation than the recorded one changes nothing (a late message
// of a previous start must not end a newer start's restore).
func applyIncarnation(s *state, c IncarnationCommand) error {
	m, ok := s.members[c.ID]
	if !ok {
		return fmt.Errorf("%w: unknown member %q", block.ErrInvalidArgument, c.ID)
	}
	if c.Incarnation == 0 {
		return fmt.Errorf("%w: member %q: incarnation 0", block.ErrInvalidArgument, c.ID)
	}
	if c.Incarnation < m.Incarnation || c.Incarnation == m.Incarnation && m.Restoring == c.Restoring {
		return nil
	}
	m.Incarnation, m.Restoring = c.Incarnation, c.Restoring
	s.setMember(m)
	return nil
}

func (f *FSM) applyIndex(s *state, idx uint64, ops []Op) []OpResult {
	txn := s.indexTxn()
	out := make([]OpResult, len(ops))
	for i, o := range ops {
		out[i] = applyOp(s, txn, idx, o)
	}
	if s.refs.needsCompact() {
		txn.compactRefs()
	}
	txn.commit()
	f.notePuts(idx, ops, out)
	f.ops.Add(uint64(len(ops)))
	return out
}

func applyOp(s *state, txn *indexTxn, idx uint64, o Op) OpResult {
	if o.Kind == 0 {
		return OpResult{Status: StatusSkipped}
	}
	if o.Validate() != nil {
		return OpResult{Status: StatusInvalid}
	}
	k := keyOf(o.Key)
	old, exists := txn.get(o.Key.Namespace, k)
	switch o.Kind {
	case OpPut:
		ns, ok := s.namespaces[o.Key.Namespace]
		if !ok {
			return OpResult{Status: StatusUnknownNamespace}
		}
		if exists {
			if old.sum == o.Sum && old.size == o.Size {
				return OpResult{Status: StatusExisted, Generation: old.gen}
			}
			return OpResult{Status: StatusConflict, Generation: old.gen}
		}
		if o.Size > ns.MaxBlockSize {
			return OpResult{Status: StatusInvalid}
		}
		dataShards := max(ns.DataShards, 1)
		place := freshPlacement(s, o)
		if len(place) < dataShards {
			return OpResult{Status: StatusStaleHolder}
		}
		txn.tree(o.Key.Namespace).set(txn.gen, s.toSlot(k, Entry{
			Size: o.Size, Sum: o.Sum, Placement: place, TierHints: o.TierHints,
			PinUntil: o.PinUntil, Generation: idx, Created: o.Created,
		}))
		return OpResult{Status: StatusCreated, Generation: idx}
	case OpDelete:
		if !exists {
			return OpResult{Status: StatusNotFound}
		}
		if o.IfGeneration != 0 && o.IfGeneration != old.gen {
			return OpResult{Status: StatusConflict, Generation: old.gen}
		}
		gen := old.gen
		s.refs.release(old)
		txn.tree(o.Key.Namespace).delete(txn.gen, k)
		return OpResult{Status: StatusDeleted, Generation: gen}
	case OpPin:
		if !exists {
			return OpResult{Status: StatusNotFound}
		}
		if pin := unixNano(o.PinUntil); o.PinUntil.After(fromUnixNano(old.pin)) {
			sl := *old // old may be shared with published states
			sl.pin = pin
			txn.tree(o.Key.Namespace).set(txn.gen, sl)
		}
		return OpResult{Status: StatusPinned, Generation: old.gen}
	case OpPlace:
		if !exists {
			return OpResult{Status: StatusNotFound}
		}
		if old.sum != o.Sum {
			return OpResult{Status: StatusConflict, Generation: old.gen}
		}
		prev := old.entry(s).Placement
		if o.IfPlacement != nil && !slices.Equal(prev, o.IfPlacement) {
			if slices.Equal(prev, o.Placement) {
				// This very change committed already (a retry after an
				// answer lost with the leadership): idempotent, as every
				// index operation is.
				return OpResult{Status: StatusUpdated, Generation: old.gen}
			}
			// Planned from a placement another writer has changed since.
			return OpResult{Status: StatusConflict, Generation: old.gen}
		}
		place := o.Placement
		if !o.Written.IsZero() {
			dataShards := 1
			if ns, ok := s.namespaces[o.Key.Namespace]; ok {
				dataShards = max(ns.DataShards, 1)
			}
			place = dropStale(s, o.Placement, unixNano(o.Written), func(sh Shard) bool {
				return !slices.ContainsFunc(prev, func(p Shard) bool {
					return p.NodeID == sh.NodeID && (dataShards == 1 || p.Index == sh.Index)
				})
			})
			if len(place) < dataShards {
				return OpResult{Status: StatusStaleHolder, Generation: old.gen}
			}
		}
		sl := *old
		s.refs.release(old)
		sl.setPlacement(s, place)
		txn.tree(o.Key.Namespace).set(txn.gen, sl)
		return OpResult{Status: StatusUpdated, Generation: sl.gen}
	}
	return OpResult{Status: StatusInvalid}
}

// A put's shards are written before its entry commits. A holder SIGKILLed
// and restarted in between lost its shard with the old process, and if its
// new incarnation (a clock reading taken when the process starts, before it
// serves) was recorded before the entry committed, its restore pass, which
// reads the index only after recording it, may never see the entry. So
// when a put applies, the shards on members whose current start came after
// the put began (o.Created, taken before its first shard write) leave the
// entry's placement; repair counts them missing and rebuilds them.
//
// The comparison is between two members' clocks (the writer's and the
// holder's). A writer whose clock runs behind drops a shard that reached
// the new process (repair rewrites it); one whose clock runs ahead by more
// than the time from a holder's death to its new start keeps a shard of
// the old process, as before this check. Members' clocks are expected to
// agree to well under a restart's duration (NTP).
func freshPlacement(s *state, o Op) []Shard {
	if o.Created.IsZero() {
		return o.Placement
	}
	return dropStale(s, o.Placement, unixNano(o.Created), nil)
}

// An OpPlace's new shards (those whose member and index, or for replicas
// (k=1) whose member, the entry's placement did not name before it) were written by repair, drain or the
// rebalancer before it commits, with the same window as a put's: an op
// carrying Written (taken before its first shard write) loses those on
// members that started after it; fewer than the data shards left, it is
// refused (stale-holder) and the writer keeps the old copies. Shards the
// entry already named are the restarted members' restore passes' business.
//
// dropStale returns place without the shards on members whose recorded
// incarnation is later than began (UnixNano), considering only the shards
// for which fresh reports true (all of them when fresh is nil). place is
// returned as is when nothing drops.
func dropStale(s *state, place []Shard, began int64, fresh func(Shard) bool) []Shard {
	stale := func(sh Shard) bool {
		m, ok := s.members[sh.NodeID]
		return ok && m.Incarnation != 0 && int64(m.Incarnation) > began && (fresh == nil || fresh(sh))
	}
	if !slices.ContainsFunc(place, stale) {
		return place
	}
	out := make([]Shard, 0, len(place))
	for _, sh := range place {
		if !stale(sh) {
			out = append(out, sh)
		}
	}
	return out
}

func applyMember(s *state, c MemberCommand) error {
	m := c.Member
	switch c.Action {
	case MemberUpsert:
		if err := m.Validate(); err != nil {
			return err
		}
		if old, ok := s.members[m.ID]; ok && old.State == MemberDraining && m.State == MemberAlive {
			// A draining node that restarts joins (or registers) again as
			// alive: that must not cancel its drain.
			m.State = MemberDraining
		}
		if old, ok := s.members[m.ID]; ok {
			// Only CmdIncarnation changes these.
			m.Incarnation, m.Restoring = old.Incarnation, old.Restoring
		}
		s.setMember(m)
	case MemberSetState:
		old, ok := s.members[m.ID]
		if !ok {
			return fmt.Errorf("%w: unknown member %q", block.ErrInvalidArgument, m.ID)
		}
		if !m.State.valid() {
			return fmt.Errorf("%w: member state %d", block.ErrInvalidArgument, m.State)
		}
		old.State = m.State
		s.setMember(old)
	case MemberRemove:
		if _, ok := s.members[m.ID]; ok {
			s.members = maps.Clone(s.members)
			delete(s.members, m.ID)
			s.memberList = nil
		}
	}
	return nil
}

// setMember records m in a copy of s.members (published states share the
// old map) and drops the sorted list publish rebuilds.
func (s *state) setMember(m Member) {
	s.members = maps.Clone(s.members)
	s.members[m.ID] = m
	s.memberList = nil
}

// sortMembers returns the members sorted by id (never nil, so publish
// sorts an empty set once).
func sortMembers(members map[string]Member) []Member {
	out := make([]Member, 0, len(members))
	for _, m := range members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func applyNamespace(s *state, c NamespaceCommand) error {
	ns := c.Namespace
	switch c.Action {
	case NamespaceCreate:
		ns = ns.WithDefaults()
		if err := ns.Validate(); err != nil {
			return err
		}
		if old, ok := s.namespaces[ns.Name]; ok {
			if old == ns {
				return nil
			}
			return fmt.Errorf("%w: %q", block.ErrNamespaceExists, ns.Name)
		}
	case NamespaceUpdate:
		ns = ns.WithDefaults()
		if err := ns.Validate(); err != nil {
			return err
		}
		old, ok := s.namespaces[ns.Name]
		if !ok {
			return fmt.Errorf("%w: %q", block.ErrUnknownNamespace, ns.Name)
		}
		if old.BlockTokens != ns.BlockTokens || old.HashScheme != ns.HashScheme || old.TenantSalt != ns.TenantSalt || old.IsObject() != ns.IsObject() || old.Model != ns.Model {
			return fmt.Errorf("%w: namespace %q: model, kind, block_tokens, hash_scheme and tenant_salt cannot change", block.ErrInvalidArgument, ns.Name)
		}
		// Stored blocks are decoded with the namespace's code: k and m are
		// fixed once the namespace exists.
		if old.DataShards != ns.DataShards || old.ParityShards != ns.ParityShards {
			return fmt.Errorf("%w: namespace %q: data_shards and parity_shards cannot change", block.ErrInvalidArgument, ns.Name)
		}
	case NamespaceDelete:
		if ns.Name == block.DefaultNamespace {
			return fmt.Errorf("%w: the default namespace cannot be deleted", block.ErrInvalidArgument)
		}
		if _, ok := s.namespaces[ns.Name]; !ok {
			return fmt.Errorf("%w: %q", block.ErrUnknownNamespace, ns.Name)
		}
		if t := s.index[ns.Name]; t != nil && t.n > 0 {
			return fmt.Errorf("%w: %q", block.ErrNamespaceNotEmpty, ns.Name)
		}
		s.namespaces = maps.Clone(s.namespaces)
		delete(s.namespaces, ns.Name)
		return nil
	}
	s.namespaces = maps.Clone(s.namespaces)
	s.namespaces[ns.Name] = ns
	return nil
}

func applyCredential(s *state, c CredentialCommand) error {
	switch c.Action {
	case CredentialPut:
		if err := c.Credential.Validate(); err != nil {
			return err
		}
		s.creds = maps.Clone(s.creds)
		s.creds[c.Credential.AccessKeyID] = c.Credential
	case CredentialDelete:
		if _, ok := s.creds[c.Credential.AccessKeyID]; ok {
			s.creds = maps.Clone(s.creds)
			delete(s.creds, c.Credential.AccessKeyID)
		}
	}
	return nil
}

// --- reads -----------------------------------------------------------------

// AppliedIndex is the log index of the last entry this FSM has seen.
func (f *FSM) AppliedIndex() uint64 { return f.cur.Load().applied }

// Len is the number of index entries.
func (f *FSM) Len() int { return f.cur.Load().indexLen() }

// Lookup returns key's entry.
func (f *FSM) Lookup(key block.Key) (Entry, bool) {
	s := f.cur.Load()
	sl, ok := s.index[key.Namespace].get(keyOf(key))
	if !ok {
		return Entry{}, false
	}
	return sl.entry(s), true
}

// LookupPrefix returns how many leading keys are in the index, stopping at
// the first miss: the prefix of a chain that can be fetched instead of
// recomputed. All keys are read from one consistent state.
func (f *FSM) LookupPrefix(keys []block.Key) int {
	s := f.cur.Load()
	for i, k := range keys {
		if _, ok := s.index[k.Namespace].get(keyOf(k)); !ok {
			return i
		}
	}
	return len(keys)
}

// Scan calls fn for each entry of namespace ns whose object name starts
// with hexPrefix (0..16 lowercase hex digits; "" for all), in (hash, part)
// order, until fn returns false. It reads one consistent state.
func (f *FSM) Scan(ns, hexPrefix string, fn func(block.Key, Entry) bool) error {
	if len(hexPrefix) > block.HashHexLen {
		return fmt.Errorf("%w: hash prefix %q longer than %d digits", block.ErrInvalidKey, hexPrefix, block.HashHexLen)
	}
	padded := hexPrefix + strings.Repeat("0", block.HashHexLen-len(hexPrefix))
	h, err := block.ParseHash(padded)
	if err != nil {
		return err
	}
	// The hashes that start with hexPrefix run from h (the prefix padded
	// with zeros) to h with the digits after the prefix all ones.
	last := h | (1<<(4*(block.HashHexLen-len(hexPrefix))) - 1)
	if hexPrefix == "" {
		last = ^uint64(0)
	}
	s := f.cur.Load()
	s.index[ns].ascend(ikey{hash: h}, func(sl *slot) bool {
		if sl.hash > last {
			return false
		}
		return fn(sl.key().blockKey(ns), sl.entry(s))
	})
	return nil
}

// ScanReusing calls fn with every entry of namespace ns in hash order, as
// Scan with an empty prefix, until fn returns false; but every entry's
// Placement is in one buffer reused from call to call: valid only until fn
// returns (clone it to keep it). A scan of the whole index (the leader's
// repair scan) then allocates nothing per entry.
func (f *FSM) ScanReusing(ns string, fn func(block.Key, Entry) bool) {
	f.ScanReusingFrom(ns, block.Key{}, fn)
}

// ScanReusingFrom is ScanReusing from the first entry at or after from in
// the index's order (hash, then the whole block before its parts, parts in
// order): a scan that stopped can resume where it stopped (the leader's
// rebalancing pages).
func (f *FSM) ScanReusingFrom(ns string, from block.Key, fn func(block.Key, Entry) bool) {
	s := f.cur.Load()
	var buf []Shard
	s.index[ns].ascend(keyOf(from), func(sl *slot) bool {
		e := sl.entryInto(s, buf)
		buf = e.Placement
		return fn(sl.key().blockKey(ns), e)
	})
}

// Members lists the members sorted by id, in a slice of the caller's own.
func (f *FSM) Members() []Member {
	s := f.cur.Load()
	if s.memberList == nil { // a state not published by publish
		return sortMembers(s.members)
	}
	return slices.Clone(s.memberList)
}

// EachMember calls fn with each member in id order until fn returns
// false, without copying the list (the data path's placement reads the
// members once per block).
func (f *FSM) EachMember(fn func(Member) bool) {
	s := f.cur.Load()
	list := s.memberList
	if list == nil {
		list = sortMembers(s.members)
	}
	for _, m := range list {
		if !fn(m) {
			return
		}
	}
}

// Member returns one member.
func (f *FSM) Member(id string) (Member, bool) {
	m, ok := f.cur.Load().members[id]
	return m, ok
}

// Namespace returns a namespace or block.ErrUnknownNamespace.
func (f *FSM) Namespace(name string) (block.Namespace, error) {
	n, ok := f.cur.Load().namespaces[name]
	if !ok {
		return block.Namespace{}, fmt.Errorf("%w: %q", block.ErrUnknownNamespace, name)
	}
	return n, nil
}

// Namespaces lists the namespaces sorted by name.
func (f *FSM) Namespaces() []block.Namespace {
	out := slices.Collect(maps.Values(f.cur.Load().namespaces))
	slices.SortFunc(out, func(a, b block.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Credential returns the credential of an access key id.
func (f *FSM) Credential(accessKeyID string) (Credential, bool) {
	c, ok := f.cur.Load().creds[accessKeyID]
	return c, ok
}

// CredentialIDs lists the access key ids, sorted.
func (f *FSM) CredentialIDs() []string {
	return slices.Sorted(maps.Keys(f.cur.Load().creds))
}

// Expired reports whether e has outlived its namespace's TTL at now; the
// leader's reaper proposes deletes for such entries (the FSM itself never
// reads a clock).
func Expired(ns block.Namespace, e Entry, now time.Time) bool {
	return ns.TTLSeconds > 0 && !e.Created.IsZero() && now.Sub(e.Created) > ns.TTL() && now.After(e.PinUntil)
}
