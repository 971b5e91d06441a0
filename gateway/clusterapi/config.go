package clusterapi

import (
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// Config holds the settings of the operator surfaces that the cluster's
// shared HTTP transport (control.Config: token, TLS, timeouts, body bound,
// given to the control.Server the Handler is built over) does not.
type Config struct {
	// ProtectStatus makes status and repair require the token too (ctxd
	// sets it with --auth required, where nothing is open to anonymous
	// callers but health and metrics).
	ProtectStatus bool
	// StatusReaders, when set, also admits to status and repair a request
	// it returns nil for, when ProtectStatus asks for the token: ctxd lets
	// any access key's credentials in (httpapi.Server.Authenticate), so a
	// cluster-aware client (Go client.Cluster, Python ClusterClient) reads
	// the member list with the key it uses for blocks, not the cluster
	// secret. Every other cluster endpoint still needs the token.
	StatusReaders func(*http.Request) error
	// Keys, when set, is the cluster's access-key store served under
	// PathKeys: create and revoke (forwarded to the leader) and list. Those
	// endpoints always require the token, and answer 401 when there is none.
	Keys credential.Store
}

// DefaultConfig returns the defaults: status and repair open, no access
// keys.
func DefaultConfig() Config { return Config{} }

// Validate checks the configuration; every combination is valid today.
func (c Config) Validate() error { return nil }

// Option adjusts the Config of a Handler.
type Option func(*Config)

// WithProtectStatus sets Config.ProtectStatus.
func WithProtectStatus(on bool) Option { return func(c *Config) { c.ProtectStatus = on } }

// WithStatusReaders sets Config.StatusReaders.
func WithStatusReaders(check func(*http.Request) error) Option {
	return func(c *Config) { c.StatusReaders = check }
}

// WithKeys sets Config.Keys.
func WithKeys(keys credential.Store) Option { return func(c *Config) { c.Keys = keys } }
