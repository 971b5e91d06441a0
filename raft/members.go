package raft

import "github.com/ctxtier/ctxtier/raft/fsm"

// Member returns the committed member record of id from this node's FSM.
func (n *Node) Member(id string) (fsm.Member, bool) { return n.fsm.Member(id) }

// Members lists the committed member records, sorted by id.
func (n *Node) Members() []fsm.Member { return n.fsm.Members() }

// Fault is the FSM's first hard apply error (fsm.FSM.Fault), nil when all
// is well.
func (n *Node) Fault() error { return n.fsm.Fault() }
