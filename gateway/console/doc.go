// Package console is the operator's console that ctxd serves at /ui/ on its
// HTTP port: one page, embedded in the binary (plain HTML, CSS and
// JavaScript, no build step and no CDN), that shows the cluster (members,
// leader, Raft indexes, repair and drains), each node's tiers with 15-minute
// charts, namespaces, the router's workers and the KV-event streams, and
// that lets an operator holding an admin access key drain a node, transfer
// leadership or revoke an access key.
//
// The page polls JSON endpoints under /ui/api/. Their numbers come from the
// sources /metrics and `ctxctl cluster status --json` read: the node's
// Prometheus registry (a prometheus.Gatherer) and the cluster status
// snapshot. The charts come from a Sampler, a fixed-size in-process ring
// filled every few seconds, so no Prometheus is needed. The data the
// console reads is declared here as small interfaces (Cluster, Keys,
// Namespaces, Router) that cmd/ctxd implements. docs/operations.md shows
// the page; docs/api.md describes the endpoints.
package console
