// Package validation checks the deployment artifacts under deploy/ offline,
// in `go test`, with no cluster, Docker engine or network: the Kubernetes
// manifests decode strictly into the typed API objects and agree with each
// other (ports, probes, names, selectors, volumes, secrets) and with ctxd's
// settings; the compose files and the Dockerfile use only ctxd's settings and
// consistent ports; and the Grafana dashboard queries only metrics that ctxd
// exports.
//
// The package's code is the loaders and the checks; the tests run them on
// the files in the repository and on broken copies, to show that each check
// catches what it is meant to.
package validation
