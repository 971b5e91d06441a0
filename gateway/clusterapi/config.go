package clusterapi

import (
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

// WithKeys sets Config.Keys.
func WithKeys(keys credential.Store) Option { return func(c *Config) { c.Keys = keys } }
