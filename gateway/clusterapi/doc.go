// Package clusterapi is the operator's HTTP surface of a ctxtier cluster,
// mounted by ctxd under /v1/cluster/: cluster status (Snapshot builds the
// same reply in process, for the console), remove, drain,
// transfer-leadership, repair progress and the cluster's access keys; and
// Client, the Go client `ctxctl cluster` uses. Membership requests sent to
// a follower are relayed to the leader.
//
// The node-to-node endpoints beside it (join, propose forwarding,
// read-index, session end, traffic) and the HTTP transport they all share
// (token, TLS, timeouts, error replies with the leader hint, the relay to
// the leader) are the cluster's own, in ctxstore/cluster/control: Handler
// is built over a control.Server, and Client over a control.Client (so it
// calls join, session end and traffic too). docs/cluster.md is the
// reference.
package clusterapi
