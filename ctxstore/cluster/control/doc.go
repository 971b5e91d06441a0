// Package control is the cluster's node-to-node control traffic over HTTP:
// what ctxd processes call on each other, never a client or an operator.
// It holds, for each of those endpoints, the path, the JSON wire types, the
// server side and the client side:
//
//   - join: a starting node adds itself through any member (Join; the
//     handler of PathJoin, which a follower relays to the leader);
//   - propose forwarding: a follower sends an index proposal to the leader
//     (Forwarder.Forward; the leader-only handler of PathPropose);
//   - read-index: a follower serving a linearizable read asks the leader
//     for its read index (Forwarder.ReadIndex; PathReadIndex);
//   - session end: the member where an agent session ended tells the
//     others (SessionFanout; PathSessionEnd);
//   - traffic: a member's per-namespace counters, summed by the operator
//     console of any member (Client.Traffic; PathTraffic).
//
// It also holds the HTTP transport all of the cluster's HTTP endpoints
// share, the operator surfaces of gateway/clusterapi included: the
// configuration (cluster token, TLS, timeouts, body bound), the token
// check and the standard error reply with the leader hint (Server.Route),
// the relay of a leader-only request from a follower to the leader
// (Server.Relay), and the client's error mapping (LeaderHintError, the
// retry rules of Join and Forwarder). ctxd mounts a Server on its HTTP
// API at Patterns, beside gateway/clusterapi's handler, which imports this
// package for what they share; this package never imports gateway/.
// docs/cluster.md is the reference.
package control
