package raft

import (
	"context"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Catalog is the Raft-backed namespace catalog: reads come from the local
// FSM, changes are committed through Raft (so they must run on the leader;
// elsewhere they fail with *NotLeaderError and the gateway forwards them).
// It satisfies ctxstore.Catalog.
type Catalog struct{ n *Node }

// Catalog returns the node's namespace catalog.
func (n *Node) Catalog() *Catalog { return &Catalog{n: n} }

// Namespace returns the named namespace or block.ErrUnknownNamespace.
func (c *Catalog) Namespace(name string) (block.Namespace, error) { return c.n.fsm.Namespace(name) }

// Namespaces lists all namespaces sorted by name.
func (c *Catalog) Namespaces() []block.Namespace { return c.n.fsm.Namespaces() }

// CreateNamespace adds ns (identical again: no error; different:
// block.ErrNamespaceExists).
func (c *Catalog) CreateNamespace(ctx context.Context, ns block.Namespace) error {
	if err := ns.WithDefaults().Validate(); err != nil {
		return err
	}
	return c.n.applyErr(ctx, fsm.EncodeNamespace(fsm.NamespaceCommand{Action: fsm.NamespaceCreate, Namespace: ns}))
}

// UpdateNamespace replaces a namespace's policy; identity fields cannot change.
func (c *Catalog) UpdateNamespace(ctx context.Context, ns block.Namespace) error {
	if err := ns.WithDefaults().Validate(); err != nil {
		return err
	}
	return c.n.applyErr(ctx, fsm.EncodeNamespace(fsm.NamespaceCommand{Action: fsm.NamespaceUpdate, Namespace: ns}))
}

// DeleteNamespace removes an empty namespace (one with index entries is
// block.ErrNamespaceNotEmpty: the FSM checks, atomically with the delete).
func (c *Catalog) DeleteNamespace(ctx context.Context, name string) error {
	return c.n.applyErr(ctx, fsm.EncodeNamespace(fsm.NamespaceCommand{Action: fsm.NamespaceDelete, Namespace: block.Namespace{Name: name}}))
}
