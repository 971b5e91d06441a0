// Package clusterapi is the HTTP control plane of a ctxtier cluster, mounted
// by ctxd under /v1/cluster/: cluster status, membership changes (join,
// remove, transfer-leadership), the leader-only endpoint that followers
// forward index proposals to, and repair progress. Membership requests sent
// to a follower are forwarded to the leader. Join lets a starting node add
// itself through any reachable member, Forwarder sends a proposal to the
// leader, and Client is the Go client used by `ctxctl cluster`.
// docs/cluster.md is the reference.
package clusterapi
