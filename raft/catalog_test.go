package raft_test

import (
	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/raft"
)

// The Raft-backed catalog can stand in for ctxstore's file catalog.
var _ ctxstore.Catalog = (*raft.Catalog)(nil)
