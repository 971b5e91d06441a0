package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// RepairStatus is the repair progress, for ctxctl and /v1/cluster/status.
type RepairStatus struct {
	// Active: this node is the leader and runs repair.
	Active bool `json:"active"`
	// Pending shards found by the last scan (on dead, removed or unknown
	// members, or never written).
	Pending int `json:"pending"`
	// Unrepairable blocks of the last scan: too few survivors to rebuild, or
	// no member left to take a shard.
	Unrepairable   int       `json:"unrepairable"`
	RepairedShards uint64    `json:"repaired_shards"`
	RepairedBytes  uint64    `json:"repaired_bytes"`
	LastScan       time.Time `json:"last_scan"`
	ScannedBlocks  int       `json:"scanned_blocks"`
}

// RepairStatus returns the repair progress.
func (b *Backend) RepairStatus() RepairStatus {
	b.repairMu.Lock()
	defer b.repairMu.Unlock()
	s := b.repair
	s.Active = b.node.IsLeader()
	return s
}

type repairTask struct {
	key     block.Key
	entry   fsm.Entry
	code    *erasure.Code
	healthy []fsm.Shard // placement entries on members that count
	missing []int       // shard indexes to rebuild
}

func (b *Backend) repairLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.RepairInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.wake:
		}
		if b.node.IsLeader() {
			b.repairPass()
		}
	}
}

// holderOK reports whether a member's shards count: alive and suspect
// members keep theirs (a suspect may come back); dead, left and unknown
// members do not.
func holderOK(ms map[string]fsm.Member, id string) bool {
	m, ok := ms[id]
	return ok && (m.State == fsm.MemberAlive || m.State == fsm.MemberSuspect)
}

// scan finds every entry whose redundancy is below its namespace's code.
func (b *Backend) scan() (tasks []repairTask, scanned int) {
	f := b.node.FSM()
	ms := map[string]fsm.Member{}
	usable := 0
	for _, m := range f.Members() {
		ms[m.ID] = m
		if m.State == fsm.MemberAlive || m.State == fsm.MemberSuspect {
			usable++
		}
	}
	for _, ns := range f.Namespaces() {
		c, err := erasure.New(ns.DataShards, ns.ParityShards)
		if err != nil {
			continue
		}
		f.Scan(ns.Name, "", func(k block.Key, e fsm.Entry) bool {
			scanned++
			t := repairTask{key: k, entry: e, code: c}
			have := map[int]bool{}
			nodes := map[string]bool{}
			for _, s := range e.Placement {
				if !holderOK(ms, s.NodeID) {
					continue
				}
				if c.K == 1 && nodes[s.NodeID] {
					continue // a second replica on one node is no redundancy
				}
				t.healthy = append(t.healthy, s)
				have[int(s.Index)] = true
				nodes[s.NodeID] = true
			}
			if c.K == 1 {
				// Replicas are interchangeable: want min(n, usable members).
				for i := len(t.healthy); i < min(c.N(), usable); i++ {
					t.missing = append(t.missing, i)
				}
			} else {
				for i := range c.N() {
					if !have[i] {
						t.missing = append(t.missing, i)
					}
				}
			}
			if len(t.missing) > 0 {
				tasks = append(tasks, t)
			}
			return true
		})
	}
	return tasks, scanned
}

func (b *Backend) repairPass() {
	tasks, scanned := b.scan()
	pending := 0
	for _, t := range tasks {
		pending += len(t.missing)
	}
	b.met.pending.Set(float64(pending))
	b.repairMu.Lock()
	b.repair.Pending, b.repair.LastScan, b.repair.ScannedBlocks = pending, time.Now(), scanned
	b.repairMu.Unlock()
	unrepairable := 0
	for _, t := range tasks {
		select {
		case <-b.stop:
			return
		default:
		}
		if !b.node.IsLeader() {
			return
		}
		n, bytes, err := b.repairOne(t)
		if err != nil {
			unrepairable++
			b.log.Debug("repair failed", "key", t.key.String(), "err", err)
		}
		if n > 0 {
			b.met.repaired.Add(float64(n))
			b.met.repairBytes.Add(float64(bytes))
			b.met.pending.Sub(float64(n))
			b.repairMu.Lock()
			b.repair.RepairedShards += uint64(n)
			b.repair.RepairedBytes += uint64(bytes)
			b.repair.Pending -= n
			b.repairMu.Unlock()
			// Rate limit: bytes / RepairBytesPerSec.
			d := time.Duration(float64(bytes) / float64(b.cfg.RepairBytesPerSec) * float64(time.Second))
			select {
			case <-b.stop:
				return
			case <-time.After(d):
			}
		}
	}
	b.repairMu.Lock()
	b.repair.Unrepairable = unrepairable
	b.repairMu.Unlock()
}

// repairOne rebuilds t's missing shards from the survivors onto members
// that hold none of the block's shards, and commits the new placement.
func (b *Backend) repairOne(t repairTask) (shards int, bytes int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShardTimeout+b.cfg.ProposeTimeout)
	defer cancel()
	c, size := t.code, int(t.entry.Size)
	exclude := map[string]bool{}
	for _, s := range t.healthy {
		exclude[s.NodeID] = true
	}
	cands := b.candidates(exclude)
	if len(cands) == 0 {
		return 0, 0, fmt.Errorf("%w: no alive member without a shard of %s", block.ErrUnavailable, t.key)
	}
	targets, err := placement.Pick(t.key, cands, min(len(t.missing), len(cands)))
	if err != nil {
		return 0, 0, err
	}
	// Rebuild from the survivors, verified against the block's CRC.
	all := make([][]byte, c.N())
	if c.K == 1 {
		var data []byte
		for _, s := range b.readOrder(t.healthy) {
			d, err := b.fetch(ctx, s.NodeID, t.key)
			if err == nil && int64(len(d)) == t.entry.Size && block.Checksum(d) == t.entry.Sum {
				data = d
				break
			}
		}
		if data == nil {
			return 0, 0, fmt.Errorf("%w: no readable replica of %s", block.ErrUnavailable, t.key)
		}
		for i := range all {
			all[i] = data
		}
	} else {
		b.fetchShards(ctx, t.key, c, t.healthy, all, size)
		if _, ok := b.tryDecode(c, all, size, t.entry.Sum); !ok {
			// A surviving shard may be bad: decode by search, then re-encode.
			data, err := b.getCoded(ctx, t.key, t.entry, c)
			if err != nil {
				return 0, 0, err
			}
			if all, err = c.Encode(data); err != nil {
				return 0, 0, err
			}
		} else if err := c.Reconstruct(all, size); err != nil {
			return 0, 0, err
		}
	}
	place := append([]fsm.Shard(nil), t.healthy...)
	var written []fsm.Shard
	for i, tg := range targets {
		idx := t.missing[i]
		sh := fsm.Shard{NodeID: tg.ID, Index: uint16(idx)}
		opts := block.PutOptions{Sum: block.Checksum(all[idx]), HasSum: true, PinTTL: time.Until(t.entry.PinUntil)}
		if opts.PinTTL < 0 {
			opts.PinTTL = 0
		}
		if err := b.writeShard(ctx, tg.ID, shardKey(t.key, c, idx), all[idx], opts); err != nil {
			b.log.Debug("repair write failed", "key", t.key.String(), "node", tg.ID, "err", err)
			continue
		}
		written = append(written, sh)
		bytes += int64(len(all[idx]))
	}
	if len(written) == 0 {
		return 0, 0, fmt.Errorf("%w: every repair write of %s failed", block.ErrUnavailable, t.key)
	}
	place = append(place, written...)
	if c.K == 1 {
		for i := range place {
			place[i].Index = uint16(i)
		}
	}
	res, err := b.propose(ctx, fsm.PlaceOp(t.key, t.entry.Sum, place))
	if err != nil {
		return 0, 0, err
	}
	if res[0].Status != fsm.StatusUpdated {
		b.cleanup(t.key, c, written, nil)
		return 0, 0, fmt.Errorf("%w: placement of %s not updated: %s", block.ErrUnavailable, t.key, res[0].Status)
	}
	return len(written), bytes, nil
}
