package main

import (
	"log/slog"
	"path"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/s3"
)

// openS3Tier opens the S3 tier configured by the --s3-* settings; its local
// index lives in <data-dir>/s3-index and its objects under
// <s3-prefix>/<node-id>/ (each node rebuilds from, compacts and expires only
// its own packs, so nodes can share a bucket). A namespace's S3 policy and
// S3 quota are read from the catalog at demotion time; an unknown namespace
// is kept out of S3. The quota counts what this node's tier holds (under its
// own prefix), so it is per node like the others. onDrop hears of blocks
// that leave the tier without a delete.
func openS3Tier(cfg Config, namespaces func(string) (block.Namespace, error), reg prometheus.Registerer, log *slog.Logger, onDrop func(block.Key)) (*s3.Tier, error) {
	c := s3.DefaultConfig()
	c.Endpoint, c.Bucket, c.Prefix = cfg.S3Endpoint, cfg.S3Bucket, path.Join(cfg.S3Prefix, cfg.NodeID)
	c.SoloSize = cfg.S3SoloSize
	c.AccessKey, c.SecretKey = cfg.S3AccessKey, cfg.S3SecretKey
	c.TLS, c.Region = cfg.S3TLS, cfg.S3Region
	c.Dir = filepath.Join(cfg.DataDir, "s3-index")
	c.MaxBlockSize = cfg.MaxBlockSize
	c.MaxBuffer = max(c.MaxBuffer, 2*cfg.MaxBlockSize)
	c.Policy = func(ns string) s3.Policy {
		n, err := namespaces(ns)
		if err != nil {
			return s3.Policy{}
		}
		return s3.PolicyFor(n)
	}
	c.Quota = func(ns string) int64 {
		n, err := namespaces(ns)
		if err != nil {
			return 0
		}
		return n.Quota.S3
	}
	c.OnDrop = onDrop
	t, err := s3.New(c, log)
	if err != nil {
		return nil, err
	}
	reg.MustRegister(s3.NewCollector(t))
	return t, nil
}
