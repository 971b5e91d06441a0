package s3

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/tiers/s3/s3test"
)

// The integration tests run against a real S3 server, versitygw, that
// s3test starts and stops (they skip where it is not installed).

// versity is a running versitygw.
type versity struct {
	*s3test.Server
	addr string
}

func startVersity(t *testing.T) *versity {
	s := s3test.Start(t)
	return &versity{Server: s, addr: s.Addr}
}

func (v *versity) start() { v.Restart() }
func (v *versity) stop()  { v.Stop() }

const (
	gwAccess = s3test.Access
	gwSecret = s3test.Secret
)

// config returns a tier configuration for this server and a fresh bucket.
func (v *versity) config(t *testing.T, bucket string) Config {
	c := DefaultConfig()
	c.Endpoint, c.Bucket, c.Prefix = v.addr, bucket, "node-a"
	c.AccessKey, c.SecretKey = gwAccess, gwSecret
	c.Dir = t.TempDir()
	c.PackSize = 64 << 20
	c.PackBlocks = 256
	c.MaxBlockSize = 1 << 20
	c.MaxBuffer = 64 << 20
	c.PartSize = 5 << 20
	c.FlushInterval = time.Hour
	c.MaintainInterval = time.Hour
	c.RetryMin, c.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	c.GetTimeout, c.ResponseTimeout, c.DialTimeout = time.Second, time.Second, 500*time.Millisecond
	c.BreakerFailures, c.BreakerCooldown = 2, 300*time.Millisecond
	return c
}

func (v *versity) open(t *testing.T, cfg Config) *Tier {
	t.Helper()
	tr, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// objects lists the bucket through the tier's own client.
func objects(t *testing.T, tr *Tier) []string {
	t.Helper()
	var names []string
	err := tr.store.List(context.Background(), "", func(n string, _ int64) error {
		names = append(names, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fmtSize(i int) int { return 1000 + (i*7919)%30000 }
