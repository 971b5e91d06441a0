package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/ctxtier/ctxtier/cmd/internal/subcmd"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/prefill"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
	"github.com/ctxtier/ctxtier/gateway/s3api"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/tiers/policy"
	"github.com/ctxtier/ctxtier/tiers/s3"
)

// Config is everything ctxd can be told. Each field is one setting, reachable
// three ways with one name: a flag (--dram-capacity), an environment variable
// (CTXD_DRAM_CAPACITY) and a key in the YAML file (dram_capacity). Flags win
// over the environment, which wins over the file, which wins over defaults.
type Config struct {
	ConfigFile   string
	DataDir      string
	Listen       string
	HTTPListen   string
	DRAMCapacity int64
	DRAMMemFile  string
	DRAMPolicy   string
	DRAMHuge     bool
	DRAMPrefault bool
	NVMeDir      string
	NVMeCapacity int64
	NVMeSegment  int64
	NVMeSync     bool
	NVMeAdmit    string
	MaxBlockSize int64
	// InflightBudget bounds the request bodies held in memory across the
	// client-facing native, HTTP and S3 ports.
	InflightBudget int64
	PinMaxTTL      time.Duration
	PprofListen    string
	LeaseTTL       time.Duration
	Sendfile       bool
	S3AdminAddr    string
	S3Domain       string // comma-separated virtual-host base domains of the S3 endpoint
	Auth           string
	KVSubscribe    string
	// RouteModel is the router's prefill model (prefill.Parse: key=value
	// settings over Llama-3.1-8B's defaults; empty: the defaults).
	RouteModel string
	LogLevel   string
	LogFormat  string
	// RESPListen is the Redis-protocol endpoint (empty: off);
	// RESPDatabases names the namespace of each SELECT index.
	RESPListen    string
	RESPDatabases string

	// The S3 tier (under NVMe): enabled by --s3-endpoint.
	S3Endpoint  string
	S3Bucket    string
	S3Prefix    string
	S3AccessKey string
	S3SecretKey string
	S3TLS       bool
	S3Region    string
	S3SoloSize  int64
	// Cluster settings. ctxd always runs Raft: alone, a node bootstraps a
	// one-voter cluster.
	NodeID          string
	RaftListen      string
	PeerListen      string
	Advertise       string
	Join            string
	BootstrapExpect int
	InitialPeers    string
	ClusterToken    string
	// ClusterSecret (or the file ClusterSecretFile names) is the cluster's
	// node identity; ClusterToken is its older name.
	ClusterSecret     string
	ClusterSecretFile string
	Zone              string
	DeadAfter         time.Duration
	// RebalanceRate (bytes/s) and RebalanceInflight bound the shard copies
	// the leader makes when membership changes (cluster.Config).
	RebalanceRate     int64
	RebalanceInflight int
	// Node-to-node TLS (Raft and peer shard traffic): enabled by
	// --tls-cert, which needs --tls-key and --tls-ca.
	TLSCert       string
	TLSKey        string
	TLSCA         string
	TLSMutual     bool
	TLSServerName string
	// TLSClients serves the client-facing ports (native, HTTP, S3, RESP) over
	// TLS too, with the same certificate.
	TLSClients bool
}

// DefaultConfig is what `ctxd` with no flags runs: one node, data in
// ./ctxd-data, native protocol on 127.0.0.1:7400, HTTP on 127.0.0.1:7401.
func DefaultConfig() Config {
	return Config{
		DataDir:      "./ctxd-data",
		Listen:       "127.0.0.1:7400",
		HTTPListen:   "127.0.0.1:7401",
		DRAMCapacity: 1 << 30,
		DRAMPolicy:   "duel",
		NVMeCapacity: 0, // sized from the filesystem (resolveNVMe)
		NVMeSegment:  256 << 20,
		NVMeAdmit:    "all",
		MaxBlockSize: block.DefaultMaxBlockSize,
		// Sixteen max-size blocks in flight.
		InflightBudget:    16 * block.DefaultMaxBlockSize,
		PinMaxTTL:         24 * time.Hour,
		LeaseTTL:          30 * time.Second,
		S3AdminAddr:       "127.0.0.1:7403",
		RESPListen:        "127.0.0.1:7405",
		RESPDatabases:     block.DefaultNamespace,
		S3Bucket:          "ctxtier",
		S3Prefix:          "ctxtier",
		S3Region:          "us-east-1",
		S3SoloSize:        s3.DefaultConfig().SoloSize,
		Auth:              "off",
		LogLevel:          "info",
		LogFormat:         "text",
		NodeID:            defaultNodeID(),
		RaftListen:        "127.0.0.1:7402",
		PeerListen:        "",
		DeadAfter:         10 * time.Second,
		RebalanceRate:     cluster.DefaultConfig().RebalanceBytesPerSec,
		RebalanceInflight: cluster.DefaultConfig().RebalanceInflight,
	}
}

func defaultNodeID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "ctxd"
	}
	return h
}

// Validate checks the settings that the components do not check themselves.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir must not be empty"))
	}
	if c.Listen == "" || c.HTTPListen == "" {
		errs = append(errs, errors.New("listen and http-listen must not be empty"))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.S3Domain != "" {
		sc := s3api.DefaultConfig()
		sc.Domains = subcmd.SplitList(c.S3Domain)
		if err := sc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("s3-domain: %w", err))
		}
	}
	if _, err := policy.Lookup(c.DRAMPolicy); err != nil {
		errs = append(errs, fmt.Errorf("dram-policy: %w", err))
	}
	if c.NVMeAdmit != "all" && c.NVMeAdmit != "tinylfu" {
		errs = append(errs, fmt.Errorf("nvme-admission %q: want all or tinylfu", c.NVMeAdmit))
	}
	if _, err := prefill.Parse(c.RouteModel); err != nil {
		errs = append(errs, fmt.Errorf("route-model: %w", err))
	}
	if _, err := parseSubscriptions(c.KVSubscribe); err != nil {
		errs = append(errs, err)
	}
	if c.S3Endpoint != "" && !c.nvmeEnabled() {
		errs = append(errs, errors.New("s3-endpoint needs the NVMe tier (nvme-dir is off): the S3 tier takes the blocks NVMe evicts"))
	}
	if c.InflightBudget < c.MaxBlockSize {
		errs = append(errs, fmt.Errorf("inflight-budget %d must hold at least one max-block-size block (%d)", c.InflightBudget, c.MaxBlockSize))
	}
	if c.NVMeCapacity < 0 {
		errs = append(errs, fmt.Errorf("nvme-capacity %d must not be negative", c.NVMeCapacity))
	}
	if c.NodeID == "" || c.RaftListen == "" || c.PeerListen == "" {
		errs = append(errs, errors.New("node-id, raft-listen and peer-listen must not be empty"))
	}
	if c.DeadAfter < time.Second {
		errs = append(errs, fmt.Errorf("dead-after %v: want at least 1s", c.DeadAfter))
	}
	if c.RebalanceRate <= 0 || c.RebalanceInflight < 1 {
		errs = append(errs, fmt.Errorf("rebalance-rate %d must be positive and rebalance-inflight %d at least 1", c.RebalanceRate, c.RebalanceInflight))
	}
	if peers, err := parsePeers(c.InitialPeers); err != nil {
		errs = append(errs, err)
	} else if len(peers) > 0 && c.BootstrapExpect != 0 && c.BootstrapExpect != len(peers) {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d but initial-peers names %d nodes", c.BootstrapExpect, len(peers)))
	} else if c.BootstrapExpect > 1 && len(peers) == 0 && c.Join == "" {
		errs = append(errs, fmt.Errorf("bootstrap-expect %d needs --join (join-or-bootstrap) or --initial-peers (ID@RAFTADDR for every node, the same list on each)", c.BootstrapExpect))
	}
	if c.ClusterSecret != "" && c.ClusterToken != "" && c.ClusterSecret != c.ClusterToken {
		errs = append(errs, errors.New("cluster-secret and cluster-token (its older name) differ: give one"))
	}
	if (c.ClusterSecret != "" || c.ClusterToken != "") && c.ClusterSecretFile != "" {
		errs = append(errs, errors.New("give the cluster secret once: cluster-secret or cluster-secret-file"))
	}
	if s := c.secretSource().Value; s != "" {
		if err := clustersecret.Validate(s); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := parseDatabases(c.RESPDatabases); err != nil {
		errs = append(errs, err)
	}
	if c.Auth != "off" && c.Auth != "required" {
		errs = append(errs, fmt.Errorf("auth %q: want off or required", c.Auth))
	}
	errs = append(errs, c.validateTLS()...)
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

// secretSource is where the operator gave the cluster secret, if anywhere.
func (c Config) secretSource() clustersecret.Source {
	v := c.ClusterSecret
	if v == "" {
		v = c.ClusterToken
	}
	return clustersecret.Source{Value: v, File: c.ClusterSecretFile}
}

// validateTLS checks that the --tls-* settings come together.
func (c Config) validateTLS() []error {
	var missing []string
	for _, f := range []struct{ name, value string }{{"tls-cert", c.TLSCert}, {"tls-key", c.TLSKey}, {"tls-ca", c.TLSCA}} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) == 0:
		return nil
	case len(missing) < 3:
		return []error{fmt.Errorf("node-to-node TLS needs tls-cert, tls-key and tls-ca together: %s not set", strings.Join(missing, ", "))}
	}
	var errs []error
	if c.TLSMutual {
		errs = append(errs, errors.New("tls-mutual needs tls-cert, tls-key and tls-ca"))
	}
	if c.TLSServerName != "" {
		errs = append(errs, errors.New("tls-server-name needs tls-cert, tls-key and tls-ca"))
	}
	if c.TLSClients {
		errs = append(errs, errors.New("tls-clients needs tls-cert, tls-key and tls-ca"))
	}
	return errs
}

// loadTLS reads the node-to-node TLS material; nil when TLS is off.
func (c Config) loadTLS() (*raft.TLS, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	t, err := raft.LoadTLS(c.TLSCert, c.TLSKey, c.TLSCA, c.TLSServerName, c.TLSMutual)
	if err != nil {
		return nil, fmt.Errorf("tls-cert/tls-key/tls-ca: %w", err)
	}
	return t, nil
}

type sizeValue struct{ p *int64 }

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return block.FormatSize(*v.p)
}
func (v sizeValue) Set(s string) error {
	n, err := block.ParseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// flags binds every setting of c to a flag set.
func flags(c *Config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ctxd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "YAML config file (keys are the flag names with _ for -)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the node's data")
	fs.StringVar(&c.Listen, "listen", c.Listen, "native block protocol address")
	fs.StringVar(&c.HTTPListen, "http-listen", c.HTTPListen, "HTTP API, /metrics and health address")
	fs.Var(sizeValue{&c.DRAMCapacity}, "dram-capacity", "DRAM tier capacity, a hard bound (e.g. 8GiB)")
	fs.StringVar(&c.DRAMMemFile, "dram-memfile", c.DRAMMemFile, "memory file backing the DRAM arena (default: an anonymous memfd)")
	fs.BoolVar(&c.DRAMHuge, "dram-hugepages", c.DRAMHuge, "back the DRAM arena with transparent huge pages (madvise; needs the kernel's transparent_hugepage/shmem_enabled at advise or always, else the startup log warns and 4 KiB pages are used)")
	fs.BoolVar(&c.DRAMPrefault, "dram-prefault", c.DRAMPrefault, "populate the whole DRAM arena at start-up, so that puts never take first-touch page faults (start-up takes longer and the arena is resident at once)")
	fs.StringVar(&c.DRAMPolicy, "dram-policy", c.DRAMPolicy, "DRAM replacement policy: "+strings.Join(policy.Names(), ", "))
	fs.StringVar(&c.NVMeDir, "nvme-dir", c.NVMeDir, "directory of the NVMe tier (segment files and index); default DATA_DIR/nvme; off disables the tier")
	fs.Var(sizeValue{&c.NVMeCapacity}, "nvme-capacity", "NVMe tier capacity, a hard bound on its segment files; 0 (default): min(16GiB, half the free space of its filesystem), said in the startup log")
	fs.Var(sizeValue{&c.NVMeSegment}, "nvme-segment-size", "size of one NVMe segment file")
	fs.BoolVar(&c.NVMeSync, "nvme-sync-writes", c.NVMeSync, "fdatasync every NVMe write (durable against power loss, not only crashes)")
	fs.StringVar(&c.NVMeAdmit, "nvme-admission", c.NVMeAdmit, "which DRAM evictions are written to NVMe: all, or tinylfu (blocks seen at least twice)")
	fs.Var(sizeValue{&c.MaxBlockSize}, "max-block-size", "largest block accepted (e.g. 64MiB)")
	fs.Var(sizeValue{&c.InflightBudget}, "inflight-budget", "request bodies held in memory at once across the native, HTTP, S3 (PutObject) and RESP ports; a request waits (unread) for its share")
	fs.StringVar(&c.S3AdminAddr, "s3-admin-listen", c.S3AdminAddr, "S3-compatible admin endpoint address (empty disables it)")
	fs.StringVar(&c.S3Domain, "s3-domain", c.S3Domain, "base domains (comma-separated, e.g. s3.example.com) of virtual-hosted-style S3 requests: Host BUCKET.DOMAIN addresses BUCKET; path style is always served")
	fs.StringVar(&c.RESPListen, "resp-listen", c.RESPListen, "Redis protocol (RESP2/RESP3) endpoint address, for redis-cli, redis-py and LMCache's redis:// connector (empty disables it)")
	fs.StringVar(&c.RESPDatabases, "resp-databases", c.RESPDatabases, "namespaces of the RESP endpoint's databases, ','-separated: the first is database 0 (every connection's start), the next is SELECT 1, ...")
	fs.StringVar(&c.Auth, "auth", c.Auth, "block-API authentication: off (anyone who reaches the ports may read and write every namespace) or required (S3 access keys from ctxctl keys, scoped to namespaces)")
	fs.StringVar(&c.KVSubscribe, "kv-subscribe", c.KVSubscribe, "engine KV-event streams to subscribe to, ';'-separated, each 'ns=NS,worker=ID,endpoint=tcp://HOST:PORT[,replay=tcp://HOST:PORT][,topic=T]'")
	fs.StringVar(&c.RouteModel, "route-model", c.RouteModel, "the router's prefill cost model, ','-separated key=value over Llama-3.1-8B's defaults: tokens_per_sec (on a ref_tokens prompt), ref_tokens, pass_seconds, attention (true/false), layers, dim, params (e.g. layers=80,dim=8192,params=70e9,tokens_per_sec=3000)")
	fs.StringVar(&c.S3Endpoint, "s3-endpoint", c.S3Endpoint, "S3 server host:port of the S3 tier under NVMe (empty disables the tier)")
	fs.StringVar(&c.S3Bucket, "s3-bucket", c.S3Bucket, "bucket of the S3 tier (created if missing)")
	fs.StringVar(&c.S3Prefix, "s3-prefix", c.S3Prefix, "object name prefix of the S3 tier; each node writes under PREFIX/NODE-ID/, so nodes can share a bucket")
	fs.StringVar(&c.S3AccessKey, "s3-access-key", c.S3AccessKey, "S3 tier access key (or CTXD_S3_ACCESS_KEY)")
	fs.StringVar(&c.S3SecretKey, "s3-secret-key", c.S3SecretKey, "S3 tier secret key (or CTXD_S3_SECRET_KEY)")
	fs.BoolVar(&c.S3TLS, "s3-tls", c.S3TLS, "use https to the S3 tier's server")
	fs.StringVar(&c.S3Region, "s3-region", c.S3Region, "S3 tier signing region")
	fs.Var(sizeValue{&c.S3SoloSize}, "s3-solo-size", "blocks at least this large get an S3 object of their own, read back whole; smaller ones are packed (0: pack every block)")
	fs.DurationVar(&c.PinMaxTTL, "pin-max-ttl", c.PinMaxTTL, "cap on any pin's TTL")
	fs.StringVar(&c.PprofListen, "pprof-listen", c.PprofListen, "serve Go's /debug/pprof profiles on this address (empty: off; keep it on loopback)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", c.LeaseTTL, "how long a direct-read descriptor lease (native DESCRIBE) lasts if never released")
	fs.BoolVar(&c.Sendfile, "sendfile", c.Sendfile, "send native GET payloads of DRAM-resident blocks from the arena's memory file with splice(2)/sendfile(2) instead of writev (measured slower on loopback; see docs/benchmarks.md)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	fs.StringVar(&c.NodeID, "node-id", c.NodeID, "this node's id in the cluster, for ever (default: the hostname)")
	fs.StringVar(&c.RaftListen, "raft-listen", c.RaftListen, "Raft transport address")
	fs.StringVar(&c.PeerListen, "peer-listen", c.PeerListen, "node-to-node shard traffic address (native protocol over this node's own tiers); default: the --listen host, port 7404")
	fs.StringVar(&c.Advertise, "advertise", c.Advertise, "host other nodes use to reach this node's raft, peer and http listeners (default: the listen addresses' host)")
	fs.StringVar(&c.Join, "join", c.Join, "HTTP addresses (HOST:PORT[,HOST:PORT]) of cluster members to join through")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", c.BootstrapExpect, "expected cluster size: with --initial-peers, a static bootstrap of exactly those voters; with --join, join-or-bootstrap (the node named first in --join forms the cluster, the others join it)")
	fs.StringVar(&c.ClusterSecret, "cluster-secret", c.ClusterSecret, "the cluster's node identity, required on the Raft port, the peer listener and every cluster endpoint: a node that forms a cluster creates one (printed once, kept in DATA_DIR/cluster.secret); joining nodes need it (or CTXD_CLUSTER_SECRET)")
	fs.StringVar(&c.ClusterSecretFile, "cluster-secret-file", c.ClusterSecretFile, "file holding the cluster secret (mode 0600), instead of --cluster-secret")
	fs.StringVar(&c.ClusterToken, "cluster-token", c.ClusterToken, "older name of --cluster-secret")
	fs.StringVar(&c.InitialPeers, "initial-peers", c.InitialPeers, "static bootstrap: ID@RAFTHOST:PORT[,ID@RAFTHOST:PORT], every voter including this node")
	fs.StringVar(&c.Zone, "zone", c.Zone, "failure domain (rack, host) for shard placement")
	fs.DurationVar(&c.DeadAfter, "dead-after", c.DeadAfter, "mark a silent member dead (and repair its shards) after this long")
	fs.Var(sizeValue{&c.RebalanceRate}, "rebalance-rate", "bytes per second the leader copies when it moves shards to the members placement picks after membership changes (e.g. 32MiB)")
	fs.IntVar(&c.RebalanceInflight, "rebalance-inflight", c.RebalanceInflight, "shard copies rebalancing makes at once")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM certificate this node presents on the Raft and peer listeners (and as a client with --tls-mutual); with --tls-key and --tls-ca, turns on TLS 1.3 for node-to-node traffic (not the client-facing ports)")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM private key of --tls-cert")
	fs.StringVar(&c.TLSCA, "tls-ca", c.TLSCA, "PEM CA bundle that peers' certificates must chain to")
	fs.BoolVar(&c.TLSMutual, "tls-mutual", c.TLSMutual, "require and verify a client certificate on the Raft and peer listeners (mTLS); without it anyone who reaches those ports may still speak to them")
	fs.BoolVar(&c.TLSClients, "tls-clients", c.TLSClients, "serve the client-facing ports (native, HTTP with the cluster API, S3, RESP) over TLS 1.3 too, with --tls-cert/--tls-key; clients verify against --tls-ca; no client certificate is asked for there (use --auth required)")
	fs.StringVar(&c.TLSServerName, "tls-server-name", c.TLSServerName, "name every peer's certificate must carry (default: the host of the dialed address, so certificates need a SAN for each node's advertised host)")
	return fs
}

// envName is the environment variable of a flag: CTXD_ + upper snake case.
func envName(flagName string) string {
	return "CTXD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// LoadConfig resolves the configuration from defaults, the YAML file named by
// --config or CTXD_CONFIG, the environment, and the command line.
func LoadConfig(args []string, env func(string) (string, bool), out io.Writer) (Config, error) {
	// Pass 1: find the config file.
	probe := DefaultConfig()
	pfs := flags(&probe, io.Discard)
	if v, ok := env(envName("config")); ok {
		probe.ConfigFile = v
	}
	if err := pfs.Parse(args); err != nil {
		// Report usage errors with the real output.
		fs := flags(&probe, out)
		return Config{}, fs.Parse(args)
	}
	cfg := DefaultConfig()
	fs := flags(&cfg, out)
	if probe.ConfigFile != "" {
		if err := applyFile(fs, probe.ConfigFile); err != nil {
			return Config{}, err
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := env(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.ConfigFile = probe.ConfigFile
	if cfg.PeerListen == "" {
		// Peers must reach this listener wherever clients reach --listen.
		host, _, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return Config{}, fmt.Errorf("listen %q: %w", cfg.Listen, err)
		}
		cfg.PeerListen = net.JoinHostPort(host, "7404")
	}
	return cfg, cfg.Validate()
}

func applyFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	for k, v := range m {
		name := strings.ReplaceAll(k, "_", "-")
		f := fs.Lookup(name)
		if f == nil || name == "config" {
			return fmt.Errorf("config file %s: unknown key %q", path, k)
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case float64:
			s = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			s = strconv.FormatBool(x)
		default:
			return fmt.Errorf("config file %s: key %q: want a scalar, got %T", path, k, v)
		}
		if err := f.Value.Set(s); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", path, k, err)
		}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(c Config, w io.Writer) *slog.Logger {
	lvl, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// parseSubscriptions parses --kv-subscribe.
func parseSubscriptions(s string) ([]kvevent.SubscriberConfig, error) {
	var out []kvevent.SubscriberConfig
	for _, item := range strings.Split(s, ";") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		var sc kvevent.SubscriberConfig
		for _, kv := range strings.Split(item, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, fmt.Errorf("kv-subscribe %q: %q is not key=value", item, kv)
			}
			switch k {
			case "ns":
				sc.Namespace = v
			case "worker":
				sc.Worker = v
			case "endpoint":
				sc.Endpoint = v
			case "replay":
				sc.ReplayEndpoint = v
			case "topic":
				sc.Topic = v
			default:
				return nil, fmt.Errorf("kv-subscribe %q: unknown key %q (want ns, worker, endpoint, replay, topic)", item, k)
			}
		}
		if err := sc.Validate(); err != nil {
			return nil, fmt.Errorf("kv-subscribe %q: %w", item, err)
		}
		out = append(out, sc)
	}
	return out, nil
}

// parseDatabases parses --resp-databases: namespace names, database 0 first.
func parseDatabases(s string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if err := block.ValidNamespaceName(item); err != nil {
			return nil, fmt.Errorf("resp-databases %q: database %d: %w", s, len(out), err)
		}
		out = append(out, item)
	}
	return out, nil
}

// parsePeers parses --initial-peers.
func parsePeers(s string) ([]raft.Peer, error) {
	var out []raft.Peer
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "@")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("initial-peers %q: want ID@HOST:PORT", item)
		}
		out = append(out, raft.Peer{ID: id, Addr: addr})
	}
	return out, nil
}
