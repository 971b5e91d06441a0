package main

import (
	"io"
	"strings"
	"testing"
)

func TestS3TierSettings(t *testing.T) {
	env := map[string]string{"CTXD_S3_ACCESS_KEY": "AK", "CTXD_S3_SECRET_KEY": "SK"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := LoadConfig([]string{"--nvme-dir", "n", "--s3-endpoint", "127.0.0.1:9000", "--s3-bucket", "b", "--s3-prefix", "node1", "--s3-tls", "--s3-region", "eu-1"}, lookup, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.S3AccessKey != "AK" || cfg.S3SecretKey != "SK" || cfg.S3Bucket != "b" || cfg.S3Prefix != "node1" || !cfg.S3TLS || cfg.S3Region != "eu-1" {
		t.Fatalf("%+v", cfg)
	}
	if _, err := LoadConfig([]string{"--s3-endpoint", "127.0.0.1:9000", "--nvme-dir", "off"}, lookup, io.Discard); err == nil || !strings.Contains(err.Error(), "nvme-dir") {
		t.Fatalf("s3 without nvme: %v", err)
	}
}
