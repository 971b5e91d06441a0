package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// module is the module path; rules name packages relative to it.
const module = "github.com/ctxtier/ctxtier"

// layerOf maps a package (relative to the module) to its layer: the longest
// prefix in this table that matches a whole path element wins. A package in
// no layer fails the test, so a new top-level folder must be placed here.
var layerOf = []struct{ prefix, layer string }{
	{"ctxstore/block", "block"},
	{"ctxstore/block/blocktest", "testkit"},
	{"ctxstore/block/descriptor", "leaf"},
	{"ctxstore/router/query", "leaf"},
	{"ctxstore/placement", "leaf"},
	{"ctxstore", "ctxstore"},
	{"ctxstore/cluster/peer", "transport"},
	{"ctxstore/cluster/control", "control"},
	{"ctxstore/cluster/control/controltest", "ctxstore"},
	{"raft", "raft"},
	{"tiers", "tiers"},
	{"gateway", "gateway"},
	{"gateway/client", "client"},
	{"gateway/errcode", "leaf"},
	{"gateway/native/wire", "leaf"},
	{"gateway/httpapi/httpwire", "leaf"},
	{"internal", "internal"},
	{"internal/weights", "client"},
	{"sim", "sim"},
	{"cmd", "cmd"},
	{"deploy", "cmd"},
}

// mayImport lists, per layer, the layers its packages may import (non-test
// imports only). Dependencies point down: cmd → gateway → ctxstore → (raft,
// tiers); ctxstore/block is the shared leaf and imports nothing of the
// project; the descriptor formats, the routing query types, rendezvous
// placement (a pure function of a key and a member list, which the Go
// client computes too, to send a block to its owner), the error
// table and the wire codecs of the native and HTTP protocols are leaves
// beside it (they import only the block leaf and each other, so every
// layer may use them: internal/weights, a client of the S3 endpoint, uses
// the HTTP wire's header names); sim (trace
// reading, replay, policy simulation) sits beside gateway, above the
// domain, and only cmd/ctxbench imports it (rule below). The cluster's
// node-to-node transport (transport: ctxstore/cluster/peer, the shard
// traffic) is the cluster's own wing: it speaks the native wire codec
// itself and never goes through gateway/, and only the cluster and
// cmd/ctxd, which assembles a node, import it. The HTTP half of the
// node-to-node traffic (control: ctxstore/cluster/control, join, propose
// forwarding, read-index, session end, traffic, and the HTTP transport of
// every cluster endpoint) is in the wing too: it imports neither gateway/
// (but the leaves) nor raft, and only its test kit, the cluster API that
// builds the operator surfaces over it (gateway/clusterapi) and programs
// import it; no other package under gateway/ may even name its paths
// (TestControlPathsOutsideGateway). The Go client (client)
// depends on leaves and internal helpers (exactly which: clientMay below)
// and only programs (cmd) import it: no part of the
// server calls another node through it. The weights puller
// (internal/weights, a client of the S3 endpoint that reads co-located
// nodes' blocks by descriptor through gateway/client) is in the client
// layer too, for the same reason: programs use it, the server never does. The in-memory block store of the
// tests (testkit: ctxstore/block/blocktest) imports only the block leaf, so
// the tests of every layer can use it; outside tests only the test kits
// that build on it import it (rule below).
var mayImport = map[string][]string{
	"block":     {},
	"testkit":   {"block"},
	"leaf":      {"block", "leaf"},
	"client":    {"block", "leaf", "internal", "client"},
	"internal":  {"block", "leaf", "internal"},
	"tiers":     {"block", "leaf", "tiers", "internal"},
	"raft":      {"block", "leaf", "raft", "internal"},
	"ctxstore":  {"block", "leaf", "ctxstore", "raft", "tiers", "internal", "transport", "control"},
	"transport": {"block", "leaf", "ctxstore", "transport", "internal"},
	"control":   {"block", "leaf", "ctxstore", "control", "internal"},
	"gateway":   {"block", "leaf", "ctxstore", "gateway", "internal", "control", "testkit"},
	"sim":       {"block", "leaf", "ctxstore", "tiers", "sim", "internal"},
	"cmd":       {"block", "leaf", "client", "ctxstore", "transport", "control", "raft", "tiers", "gateway", "internal", "sim", "cmd"},
}

// onlyImportedBy limits who may import a layer, beyond mayImport: sim is a
// benchmark tool's library, not part of the server; the transport is
// assembled by ctxd alone; the cluster's control traffic is the cluster
// API's transport and no other gateway's; the client is for programs,
// never for a node calling another node; the block test kit is for tests
// and the test kits over it, never for the server.
var onlyImportedBy = map[string][]string{
	"testkit":   {"gateway/native/nativetest"},
	"sim":       {"sim/", "cmd/ctxbench"},
	"cmd":       {"cmd/"},
	"transport": {"ctxstore/cluster", "ctxstore/cluster/", "cmd/ctxd"},
	"control":   {"ctxstore/cluster/control/", "gateway/clusterapi", "cmd/"},
	"client":    {"cmd/"},
}

// removed are packages that must not come back, with where their job went:
// nothing under gateway/ carries node-to-node traffic.
var removed = map[string]string{
	"gateway/peer": "the shard transport is ctxstore/cluster/peer",
}

// client is the Go client; clientMay lists every package of the project it
// may depend on (directly or not), and clientExternal the module path
// prefixes outside the standard library: the checksum and hash packages and
// the system-call package its direct reads mmap with. Nothing of the server
// (tiers, badger, Prometheus, OpenTelemetry, raft) may appear.
const client = "gateway/client"

var (
	clientMay = []string{
		"ctxstore/block", "ctxstore/block/descriptor", "ctxstore/router/query", "ctxstore/placement",
		"gateway/errcode", "gateway/native/wire", "gateway/httpapi/httpwire",
		"internal/sigv4",
	}
	clientExternal = []string{"github.com/zeebo/xxh3", "github.com/klauspost/cpuid/v2", "golang.org/x/sys/"}
)

// edge is one import: from imports to (project packages relative to the
// module, other packages by their full path).
type edge struct{ from, to string }

// knownExceptions are imports that break the rules today. The list may
// only shrink: the test fails on an exception that no longer exists, so
// remove it when its import goes. It is empty: the last ones (the client's
// AWS SDK signer, issue 19) went when the client began signing with
// internal/sigv4.
var knownExceptions = []edge{}

// pkg is the part of `go list -json` output the rules read.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

// graph is the import graph: every package by import path (project
// packages relative to the module).
type graph map[string]pkg

func rel(p string) string {
	if p == module {
		return "."
	}
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r
	}
	return p
}

func inProject(p string) bool {
	return p == module || strings.HasPrefix(p, module+"/")
}

// loadGraph runs `go list -deps -json` over the module.
func loadGraph(t *testing.T) graph {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // SA1019: the fallback when go is not on PATH; the test runs from source
	}
	cmd := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Standard,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g, err := decodeGraph(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g[client]; !ok || len(g) < 20 {
		t.Fatalf("go list returned %d packages without %s: the graph is not the module's", len(g), client)
	}
	return g
}

func decodeGraph(r io.Reader) (graph, error) {
	g := graph{}
	dec := json.NewDecoder(r)
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return g, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		if inProject(p.ImportPath) {
			p.ImportPath = rel(p.ImportPath)
			for i, imp := range p.Imports {
				if inProject(imp) {
					p.Imports[i] = rel(imp)
				}
			}
		}
		g[p.ImportPath] = p
	}
}

// layer returns the layer of project package p, or "".
func layer(p string) string {
	best, name := -1, ""
	for _, l := range layerOf {
		if (p == l.prefix || strings.HasPrefix(p, l.prefix+"/")) && len(l.prefix) > best {
			best, name = len(l.prefix), l.layer
		}
	}
	return name
}

func isProject(g graph, p string) bool {
	q, ok := g[p]
	return ok && !q.Standard && !strings.Contains(strings.SplitN(p, "/", 2)[0], ".")
}

// check returns every violation in g that is not in exceptions, and every
// exception that g no longer has.
func check(g graph, exceptions []edge) (violations, stale []string) {
	excepted := make(map[edge]bool, len(exceptions))
	for _, e := range exceptions {
		excepted[e] = true
		if !slices.Contains(g[e.from].Imports, e.to) {
			stale = append(stale, fmt.Sprintf("%s → %s: listed as a known exception, but %s no longer imports it; remove it from knownExceptions", e.from, e.to, e.from))
		}
	}
	report := func(from, to, why string) {
		if !excepted[edge{from, to}] {
			violations = append(violations, fmt.Sprintf("%s → %s: %s", from, to, why))
		}
	}
	names := make([]string, 0, len(g))
	for p := range g {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, from := range names {
		if !isProject(g, from) {
			continue
		}
		if why, ok := removed[from]; ok {
			violations = append(violations, fmt.Sprintf("%s: removed package is back (%s)", from, why))
		}
		lf := layer(from)
		if lf == "" {
			violations = append(violations, fmt.Sprintf("%s: in no layer; place it in layerOf", from))
			continue
		}
		for _, to := range g[from].Imports {
			if !isProject(g, to) {
				continue
			}
			lt := layer(to)
			if !slices.Contains(mayImport[lf], lt) {
				report(from, to, fmt.Sprintf("the %s layer may not import the %s layer", lf, lt))
				continue
			}
			if who, ok := onlyImportedBy[lt]; ok && lf != lt && !slices.ContainsFunc(who, func(w string) bool {
				return from == w || (strings.HasSuffix(w, "/") && strings.HasPrefix(from, w))
			}) {
				report(from, to, fmt.Sprintf("only %v may import the %s layer", who, lt))
			}
		}
	}
	violations = append(violations, checkClient(g, excepted)...)
	return violations, stale
}

// checkClient walks the client's dependencies, not crossing excepted
// imports, and reports each package outside clientMay and clientExternal.
func checkClient(g graph, excepted map[edge]bool) []string {
	if _, ok := g[client]; !ok {
		return []string{client + ": not in the graph"}
	}
	var out []string
	seen := map[string]bool{client: true}
	queue := []string{client}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, to := range g[from].Imports {
			if seen[to] || excepted[edge{from, to}] {
				continue
			}
			seen[to] = true
			queue = append(queue, to)
			switch q := g[to]; {
			case q.Standard, to == "C": // cgo's pseudo-package is part of the toolchain
			case isProject(g, to):
				if !slices.Contains(clientMay, to) {
					out = append(out, fmt.Sprintf("%s depends on %s (through %s): the client may depend only on %v", client, to, from, clientMay))
				}
			default:
				if !slices.ContainsFunc(clientExternal, func(p string) bool { return to == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(to, p)) }) {
					out = append(out, fmt.Sprintf("%s depends on %s (through %s): outside the standard library the client may use only %v", client, to, from, clientExternal))
				}
			}
		}
	}
	return out
}

// TestLayers checks the module's real import graph.
func TestLayers(t *testing.T) {
	g := loadGraph(t)
	violations, stale := check(g, knownExceptions)
	for _, v := range violations {
		t.Errorf("layering: %s", v)
	}
	for _, s := range stale {
		t.Errorf("stale exception: %s", s)
	}
	for _, banned := range []string{"github.com/dgraph-io/badger/v4", "github.com/prometheus/client_golang/prometheus", "go.opentelemetry.io/otel"} {
		if deps := clientDeps(g); deps[banned] {
			t.Errorf("%s depends on %s", client, banned)
		}
	}
}

// clientDeps is every package the client depends on, through every import.
func clientDeps(g graph) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, q := range g[p].Imports {
			if !seen[q] {
				seen[q] = true
				walk(q)
			}
		}
	}
	walk(client)
	return seen
}

// TestCheckFindsViolations runs the rules on small made-up graphs, so a rule
// that cannot fire is caught here rather than trusted.
func TestCheckFindsViolations(t *testing.T) {
	base := func() graph {
		return graph{
			"ctxstore/block":                 {ImportPath: "ctxstore/block", Imports: []string{"fmt"}},
			"ctxstore/block/descriptor":      {ImportPath: "ctxstore/block/descriptor", Imports: []string{"ctxstore/block", "github.com/zeebo/xxh3"}},
			"ctxstore":                       {ImportPath: "ctxstore", Imports: []string{"ctxstore/block", "tiers"}},
			"tiers":                          {ImportPath: "tiers", Imports: []string{"ctxstore/block"}},
			"raft":                           {ImportPath: "raft", Imports: []string{"ctxstore/block"}},
			"gateway/client":                 {ImportPath: "gateway/client", Imports: []string{"ctxstore/block/descriptor", "net"}},
			"gateway/native":                 {ImportPath: "gateway/native", Imports: []string{"ctxstore", "gateway/native/wire"}},
			"gateway/native/wire":            {ImportPath: "gateway/native/wire", Imports: []string{"ctxstore/block", "gateway/errcode"}},
			"gateway/errcode":                {ImportPath: "gateway/errcode", Imports: []string{"ctxstore/block"}},
			"ctxstore/cluster":               {ImportPath: "ctxstore/cluster", Imports: []string{"ctxstore/block"}},
			"ctxstore/cluster/peer":          {ImportPath: "ctxstore/cluster/peer", Imports: []string{"ctxstore/cluster", "gateway/native/wire"}},
			"ctxstore/cluster/control":       {ImportPath: "ctxstore/cluster/control", Imports: []string{"ctxstore/cluster", "gateway/errcode"}},
			"gateway/clusterapi":             {ImportPath: "gateway/clusterapi", Imports: []string{"ctxstore/cluster/control"}},
			"sim/trace":                      {ImportPath: "sim/trace"},
			"cmd/ctxbench":                   {ImportPath: "cmd/ctxbench", Imports: []string{"sim/trace", "gateway/client"}},
			"cmd/ctxd":                       {ImportPath: "cmd/ctxd", Imports: []string{"gateway/native", "ctxstore", "ctxstore/cluster/peer"}},
			"cmd/ctxctl":                     {ImportPath: "cmd/ctxctl", Imports: []string{"gateway/client"}},
			"fmt":                            {ImportPath: "fmt", Standard: true},
			"net":                            {ImportPath: "net", Standard: true},
			"github.com/zeebo/xxh3":          {ImportPath: "github.com/zeebo/xxh3"},
			"github.com/dgraph-io/badger/v4": {ImportPath: "github.com/dgraph-io/badger/v4"},
		}
	}
	cases := []struct {
		name       string
		edit       func(g graph)
		exceptions []edge
		violations int
		stale      int
	}{
		{"clean", func(graph) {}, nil, 0, 0},
		{"block imports the project (and so the client reaches it)", func(g graph) { add(g, "ctxstore/block", "tiers") }, nil, 2, 0},
		{"tiers imports ctxstore", func(g graph) { add(g, "tiers", "ctxstore") }, nil, 1, 0},
		{"ctxstore imports gateway", func(g graph) { add(g, "ctxstore", "gateway/native") }, nil, 1, 0},
		{"gateway imports raft", func(g graph) { add(g, "gateway/native", "raft") }, nil, 1, 0},
		{"gateway imports the raft FSM", func(g graph) {
			g["raft/fsm"] = pkg{ImportPath: "raft/fsm", Imports: []string{"ctxstore/block"}}
			add(g, "gateway/native", "raft/fsm")
		}, nil, 1, 0},
		{"gateway imports tiers", func(g graph) { add(g, "gateway/native", "tiers") }, nil, 1, 0},
		{"gateway imports raft, excepted", func(g graph) { add(g, "gateway/native", "raft") }, []edge{{"gateway/native", "raft"}}, 0, 0},
		{"stale exception", func(graph) {}, []edge{{"gateway/native", "raft"}}, 0, 1},
		{"ctxd imports sim", func(g graph) { add(g, "cmd/ctxd", "sim/trace") }, nil, 1, 0},
		{"tiers imports sim", func(g graph) { add(g, "tiers", "sim/trace") }, nil, 1, 0},
		{"client reaches tiers through a leaf", func(g graph) { add(g, "ctxstore/block/descriptor", "tiers") }, nil, 2, 0},
		{"client imports badger", func(g graph) { add(g, "gateway/client", "github.com/dgraph-io/badger/v4") }, nil, 1, 0},
		{"client imports badger, excepted", func(g graph) { add(g, "gateway/client", "github.com/dgraph-io/badger/v4") },
			[]edge{{"gateway/client", "github.com/dgraph-io/badger/v4"}}, 0, 0},
		{"package in no layer", func(g graph) { g["tools/x"] = pkg{ImportPath: "tools/x"} }, nil, 1, 0},
		{"gateway/peer is back", func(g graph) {
			g["gateway/peer"] = pkg{ImportPath: "gateway/peer", Imports: []string{"ctxstore/cluster"}}
		}, nil, 1, 0},
		{"gateway calls other nodes through the client", func(g graph) { add(g, "gateway/native", "gateway/client") }, nil, 1, 0},
		{"gateway imports the cluster's transport", func(g graph) { add(g, "gateway/native", "ctxstore/cluster/peer") }, nil, 1, 0},
		{"ctxctl imports the cluster's transport", func(g graph) { add(g, "cmd/ctxctl", "ctxstore/cluster/peer") }, nil, 1, 0},
		{"the transport goes through the client", func(g graph) { add(g, "ctxstore/cluster/peer", "gateway/client") }, nil, 1, 0},
		{"the transport goes through the native server", func(g graph) { add(g, "ctxstore/cluster/peer", "gateway/native") }, nil, 1, 0},
		{"the wire codec imports the native server", func(g graph) { add(g, "gateway/native/wire", "gateway/native") }, nil, 1, 0},
		{"the domain imports the error table, a leaf", func(g graph) { add(g, "ctxstore", "gateway/errcode") }, nil, 0, 0},
		{"control imports the cluster API", func(g graph) { add(g, "ctxstore/cluster/control", "gateway/clusterapi") }, nil, 1, 0},
		{"control imports the native server", func(g graph) { add(g, "ctxstore/cluster/control", "gateway/native") }, nil, 1, 0},
		{"control imports raft", func(g graph) { add(g, "ctxstore/cluster/control", "raft") }, nil, 1, 0},
		{"the cluster imports gateway", func(g graph) { add(g, "ctxstore/cluster", "gateway/native") }, nil, 1, 0},
		{"another gateway imports control", func(g graph) { add(g, "gateway/native", "ctxstore/cluster/control") }, nil, 1, 0},
		{"the domain imports control", func(g graph) { add(g, "ctxstore", "ctxstore/cluster/control") }, nil, 1, 0},
		{"ctxctl imports control", func(g graph) { add(g, "cmd/ctxctl", "ctxstore/cluster/control") }, nil, 0, 0},
		{"the native test kit imports the block test kit", func(g graph) {
			g["ctxstore/block/blocktest"] = pkg{ImportPath: "ctxstore/block/blocktest", Imports: []string{"ctxstore/block"}}
			g["gateway/native/nativetest"] = pkg{ImportPath: "gateway/native/nativetest", Imports: []string{"gateway/native", "ctxstore/block/blocktest"}}
		}, nil, 0, 0},
		{"the server imports the block test kit", func(g graph) {
			g["ctxstore/block/blocktest"] = pkg{ImportPath: "ctxstore/block/blocktest", Imports: []string{"ctxstore/block"}}
			add(g, "gateway/native", "ctxstore/block/blocktest")
		}, nil, 1, 0},
		{"the block test kit imports the domain", func(g graph) {
			g["ctxstore/block/blocktest"] = pkg{ImportPath: "ctxstore/block/blocktest", Imports: []string{"ctxstore/block", "ctxstore"}}
		}, nil, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := base()
			tc.edit(g)
			v, s := check(g, tc.exceptions)
			if len(v) != tc.violations || len(s) != tc.stale {
				t.Fatalf("got %d violations %q and %d stale %q; want %d and %d", len(v), v, len(s), s, tc.violations, tc.stale)
			}
		})
	}
}

func add(g graph, from, to string) {
	p := g[from]
	p.Imports = append(p.Imports, to)
	g[from] = p
}
