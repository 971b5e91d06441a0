package partition

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft"
)

// InmemNetwork is a Network inside one process: every replica gets
// hashicorp/raft's InmemTransport, connected to the other replicas of its
// partition, and in-memory log, stable and snapshot stores. Tests and the
// scaling harness (ctxbench scale) run many hosts on it.
type InmemNetwork struct {
	// Timeout bounds one RPC between replicas (hashicorp/raft's default is
	// 500 ms; a loaded machine running thousands of replicas needs more).
	Timeout time.Duration

	mu    sync.Mutex
	trans map[int][]*hraft.InmemTransport
}

// NewInmemNetwork returns an empty in-process network.
func NewInmemNetwork(timeout time.Duration) *InmemNetwork {
	return &InmemNetwork{Timeout: timeout, trans: map[int][]*hraft.InmemTransport{}}
}

// Addr is "member.pP:1".
func (n *InmemNetwork) Addr(member string, p int) string {
	return member + ".p" + strconv.Itoa(p) + ":1"
}

// Deps opens member's replica of p and connects it, both ways, to the
// replicas of p opened before it.
func (n *InmemNetwork) Deps(member string, p int) (raft.Deps, error) {
	if n.Timeout <= 0 {
		return raft.Deps{}, fmt.Errorf("%w: partition: in-memory network: Timeout must be positive", block.ErrInvalidArgument)
	}
	_, tr := hraft.NewInmemTransportWithTimeout(hraft.ServerAddress(n.Addr(member, p)), n.Timeout)
	n.mu.Lock()
	for _, other := range n.trans[p] {
		if other.LocalAddr() == tr.LocalAddr() {
			n.mu.Unlock()
			return raft.Deps{}, fmt.Errorf("%w: partition: %s's replica of %d is already open", block.ErrInvalidArgument, member, p)
		}
		tr.Connect(other.LocalAddr(), other)
		other.Connect(tr.LocalAddr(), tr)
	}
	n.trans[p] = append(n.trans[p], tr)
	n.mu.Unlock()
	st := hraft.NewInmemStore()
	return raft.Deps{Logs: st, Stable: st, Snapshots: hraft.NewInmemSnapshotStore(), Transport: tr}, nil
}
