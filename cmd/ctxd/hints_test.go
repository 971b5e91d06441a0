package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// hintPolicies are the two DRAM policies the agent-hint tests compare:
// the default, whose eviction order the hints change, and the same policy
// with hints ignored (the control, where hinted blocks go like the rest).
var hintPolicies = []struct {
	policy string
	args   []string
	hinted bool // the hints order evictions
}{
	{"duel", nil, true},
	{"duel-nohints", []string{"--dram-policy", "duel-nohints"}, false},
}

// TestCtxdAgentHints starts real ctxd processes with a 16 MiB DRAM tier and
// no NVMe tier (an eviction drops the block) and puts 1 MiB blocks, none
// read before the end, in this order: 4 blocks hinted reuse=session with a
// 10-minute retain window (1 over the native protocol, 1 over HTTP with
// X-Ctxtier-Reuse/X-Ctxtier-Retain, 2 over S3 with minio-go's PutObject and
// the same hints as user metadata x-amz-meta-ctx-reuse/-retain/-session)
// interleaved with 4 comparable unhinted
// peers of the same age; 8 unhinted blocks (the DRAM tier is then full); 4
// blocks hinted reuse=never (reasoning tokens); a tail of 6 unhinted
// blocks. That is 10 MiB or so more than fits. Under the default policy
// (window, which honours hints) the session blocks must all survive while
// their peers are all gone, and the reuse=never blocks must all be gone
// although they are newer than the 8 unhinted blocks before them: they go
// first. Under window-nohints (the control) the same puts evict the oldest
// blocks: session blocks and peers alike, while the reuse=never blocks
// stay. Every block read back must have the bytes put. Under window, the
// S3 blocks' session id reached the tier too: END_SESSION of that session
// releases exactly those 2 blocks.
func TestCtxdAgentHints(t *testing.T) {
	const bs = 1 << 20
	const pairs, fill, never, tail = 4, 8, 4, 6
	payload := func(i int) []byte {
		b := make([]byte, bs)
		for j := range b {
			b[j] = byte(i*151 + j*11 + j>>13)
		}
		return b
	}
	key := func(i int) block.Key { return block.NewKey("default", uint64(5000+i)) }
	// Indexes: session blocks 0..3, their unhinted peers 4..7, fill 8..15,
	// never 16..19, tail 20..25.
	session := func(i int) int { return i }
	peer := func(i int) int { return pairs + i }
	fillIdx := func(i int) int { return 2*pairs + i }
	neverIdx := func(i int) int { return 2*pairs + fill + i }
	tailIdx := func(i int) int { return 2*pairs + fill + never + i }
	total := tailIdx(tail)
	for _, tc := range hintPolicies {
		t.Run(tc.policy, func(t *testing.T) {
			dir := t.TempDir()
			admin := adminKeyFor(t, dir)
			p := startCtxd(t, append([]string{"--data-dir", dir, "--dram-capacity", "16MiB", "--nvme-dir", "off"}, tc.args...)...)
			if got := readyRecord(t, p)["dram_policy"]; got != tc.policy {
				t.Fatalf("ready log dram_policy = %v, want %s", got, tc.policy)
			}
			ctx := withTimeout(t, 3*time.Minute)
			c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !c.HintsAccepted() {
				t.Fatal("ctxd did not accept put hints")
			}
			put := func(i int, opts block.PutOptions) {
				t.Helper()
				if err := c.PutWithOptions(ctx, key(i), payload(i), opts); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			retain := block.PutOptions{Reuse: block.ReuseSession, Retain: 10 * time.Minute}
			mc := s3Client(t, p.S3, admin)
			const s3Session = 77
			for i := range pairs {
				switch i {
				case 0:
					put(session(i), retain)
				case 1:
					httpPutHinted(ctx, t, p.HTTP, key(session(i)), payload(session(i)), "session", "600")
				default:
					s3PutHinted(ctx, t, mc, key(session(i)), payload(session(i)),
						map[string]string{"ctx-reuse": "session", "ctx-retain": "10m", "ctx-session": fmt.Sprint(s3Session)})
				}
				put(peer(i), block.PutOptions{})
			}
			for i := range fill {
				put(fillIdx(i), block.PutOptions{})
			}
			for i := range never {
				put(neverIdx(i), block.PutOptions{Reuse: block.ReuseNever})
			}
			for i := range tail {
				put(tailIdx(i), block.PutOptions{})
			}
			if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`); ev < float64(total-16) {
				t.Fatalf("%v dram evictions after %d MiB of puts into 16 MiB", ev, total)
			}
			resident := make([]bool, total)
			n := 0
			for i := range resident {
				got, err := c.Get(ctx, key(i))
				switch {
				case err == nil:
					if !bytes.Equal(got, payload(i)) {
						t.Fatalf("block %d: wrong bytes", i)
					}
					resident[i] = true
					n++
				case !errors.Is(err, block.ErrNotFound):
					t.Fatalf("get %d: %v", i, err)
				}
			}
			t.Logf("%s: %d of %d blocks resident: %v", tc.policy, n, total, resident)
			for i := range pairs {
				if resident[session(i)] != tc.hinted {
					t.Errorf("session block %d resident %v, want %v", i, resident[session(i)], tc.hinted)
				}
				if resident[peer(i)] {
					t.Errorf("unhinted peer %d of a session block is resident", i)
				}
			}
			for i := range never {
				if resident[neverIdx(i)] == tc.hinted {
					t.Errorf("reuse=never block %d resident %v, want %v", i, resident[neverIdx(i)], !tc.hinted)
				}
			}
			if !resident[tailIdx(tail-1)] {
				t.Error("the newest block is gone")
			}
			if tc.hinted {
				n, err := c.EndSession(ctx, "default", s3Session)
				if err != nil {
					t.Fatal(err)
				}
				if n != pairs-2 {
					t.Errorf("END_SESSION of the S3 puts' session released %d blocks, want %d", n, pairs-2)
				}
			}
		})
	}
}

// TestCtxdAgentHintsRejected: invalid hints are InvalidArgument over the
// native protocol, HTTP and S3 (user metadata), and store nothing.
func TestCtxdAgentHintsRejected(t *testing.T) {
	dir := t.TempDir()
	admin := adminKeyFor(t, dir)
	p := startCtxd(t, "--data-dir", dir, "--dram-capacity", "16MiB", "--nvme-dir", "off")
	ctx := withTimeout(t, time.Minute)
	k := block.NewKey("default", 77)
	for _, hdr := range []map[string]string{
		{httpwire.HeaderReuse: "always"},
		{httpwire.HeaderRetain: "soon"},
		{httpwire.HeaderReuse: "never", httpwire.HeaderRetain: "30"},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+p.HTTP+"/v1/namespaces/default/blocks/"+block.FormatHash(k.Hash), bytes.NewReader([]byte("x")))
		for h, v := range hdr {
			req.Header.Set(h, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(httpwire.HeaderErrorCode) != "InvalidArgument" {
			t.Fatalf("%v: %d %s", hdr, resp.StatusCode, resp.Header.Get(httpwire.HeaderErrorCode))
		}
	}
	mc := s3Client(t, p.S3, admin)
	for _, meta := range []map[string]string{
		{"ctx-reuse": "always"},
		{"ctx-retain": "soon"},
		{"ctx-retain": "-5s"},
		{"ctx-session": "0"},
		{"ctx-session": "abc"},
		{"ctx-reuse": "never", "ctx-retain": "30"},
	} {
		_, err := mc.PutObject(ctx, "default", block.FormatHash(k.Hash), bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{UserMetadata: meta})
		resp := minio.ToErrorResponse(err)
		if err == nil || resp.Code != "InvalidArgument" || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("S3 put with %v: %v (code %q)", meta, err, resp.Code)
		}
		t.Logf("S3 put with %v: %s", meta, resp.Message)
	}
	hcfg := client.HTTPDefaultConfig()
	hcfg.BaseURL = "http://" + p.HTTP
	hc, err := client.NewHTTP(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.Put(ctx, k, []byte("x"), block.PutOptions{Reuse: block.ReuseNever, Retain: time.Second}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("HTTP client put with contradictory hints: %v", err)
	}
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.PutWithOptions(ctx, k, []byte("x"), block.PutOptions{Reuse: 9}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("native put with an undefined reuse: %v", err)
	}
	if ok, err := c.Exists(ctx, k); err != nil || ok {
		t.Fatalf("a rejected put stored the block: %v %v", ok, err)
	}
}

// httpPutHinted puts a block over ctxd's HTTP API with the hint headers.
func httpPutHinted(ctx context.Context, t *testing.T, addr string, k block.Key, data []byte, reuse, retain string) {
	t.Helper()
	url := fmt.Sprintf("http://%s/v1/namespaces/%s/blocks/%s", addr, k.Namespace, block.FormatHash(k.Hash))
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpwire.HeaderReuse, reuse)
	req.Header.Set(httpwire.HeaderRetain, retain)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("HTTP put %s: %d", k, resp.StatusCode)
	}
}

// TestCtxdReadRetainAndSessionEnd runs real ctxd processes with a 16 MiB
// DRAM tier, no NVMe tier and 1 MiB blocks.
//
// Read re-arm: two unhinted blocks of the same age are both read once, one
// with a 10-minute read retain window (client.WithRetain), then 40 blocks
// are put and read once each (2.5 times the tier). Under the default policy
// the re-armed block survives and its twin is gone; under window-nohints
// (the control) both are gone.
//
// Session end: two blocks of session 7 and two of session 8 (reuse=session,
// 10-minute windows), and a shared block of session 7; END_SESSION for 7
// (when the case says so), then 14 unhinted blocks, a few more than fit.
// After the end, session 7's own blocks are the ones evicted while session
// 8's and the shared block stay; without it every hinted block stays. (The
// control's order there is Window's own and is not checked.)
func TestCtxdReadRetainAndSessionEnd(t *testing.T) {
	const bs = 1 << 20
	payload := func(i int) []byte {
		b := make([]byte, bs)
		for j := range b {
			b[j] = byte(i*37 + j*13 + j>>12)
		}
		return b
	}
	key := func(i int) block.Key { return block.NewKey("default", uint64(9000+i)) }
	for _, tc := range []struct {
		name     string
		args     []string
		rearm    bool // the re-armed block must survive the flood
		end      bool // send END_SESSION for session 7
		released int  // blocks END_SESSION reports
	}{
		{name: "window, session ended", rearm: true, end: true, released: 2},
		{name: "window, session live", rearm: true},
		{name: "window-nohints", args: []string{"--dram-policy", "window-nohints"}, end: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startCtxd(t, append([]string{"--dram-capacity", "16MiB", "--nvme-dir", "off"}, tc.args...)...)
			ctx := withTimeout(t, 3*time.Minute)
			c := dialSessions(ctx, t, p.Native)
			put := func(i int, o block.PutOptions) {
				t.Helper()
				if err := c.PutWithOptions(ctx, key(i), payload(i), o); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
			}
			read := func(rctx context.Context, i int) bool {
				t.Helper()
				got, err := c.Get(rctx, key(i))
				switch {
				case err == nil:
					if !bytes.Equal(got, payload(i)) {
						t.Fatalf("block %d: wrong bytes", i)
					}
					return true
				case !errors.Is(err, block.ErrNotFound):
					t.Fatalf("get %d: %v", i, err)
				}
				return false
			}

			// Read re-arm: 0 is re-armed, 1 its twin.
			put(0, block.PutOptions{})
			put(1, block.PutOptions{})
			read(client.WithRetain(ctx, 10*time.Minute), 0)
			read(ctx, 1)
			for i := 100; i < 140; i++ {
				put(i, block.PutOptions{})
				read(ctx, i)
			}
			if got := read(ctx, 0); got != tc.rearm {
				t.Errorf("re-armed block resident %v, want %v", got, tc.rearm)
			}
			if read(ctx, 1) {
				t.Error("the twin that was read without a retain window survived the flood")
			}

			// Session end: 10, 11 session 7; 12, 13 session 8; 14 shared, session 7.
			for i := 140; i < 156; i++ { // a full tier of fresh unhinted blocks first
				put(i, block.PutOptions{})
			}
			s7 := block.PutOptions{Reuse: block.ReuseSession, Retain: 10 * time.Minute, Session: 7}
			s8 := s7
			s8.Session = 8
			shared := block.PutOptions{Reuse: block.ReuseShared, Retain: 10 * time.Minute, Session: 7}
			put(10, s7)
			put(11, s7)
			put(12, s8)
			put(13, s8)
			put(14, shared)
			if tc.end {
				n, err := c.EndSession(ctx, "default", 7)
				if err != nil || n != tc.released {
					t.Fatalf("end session 7: %d blocks released, %v; want %d", n, err, tc.released)
				}
			}
			before := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`)
			for i := 200; i < 214; i++ {
				put(i, block.PutOptions{})
			}
			if ev := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`) - before; ev < 2 {
				t.Fatalf("%v dram evictions from the last 14 puts", ev)
			}
			if hinted := tc.rearm; hinted { // the control ignores every hint: its order is Window's own
				for _, i := range []int{10, 11} {
					if got := read(ctx, i); got == tc.end {
						t.Errorf("session 7 block %d resident %v (session ended: %v)", i, got, tc.end)
					}
				}
				for _, i := range []int{12, 13, 14} {
					if !read(ctx, i) {
						t.Errorf("block %d of a live session or shared is gone", i)
					}
				}
			}
			if !read(ctx, 213) {
				t.Error("the newest block is gone")
			}
		})
	}
}

// s3Client is a minio-go client of ctxd's S3 endpoint with key.
func s3Client(t *testing.T, addr string, key credential.Credential) *minio.Client {
	t.Helper()
	mc, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(key.AccessKeyID, key.Secret, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// s3PutHinted puts a block as an object of its namespace's bucket with
// meta as user metadata (minio-go sends x-amz-meta-<name>).
func s3PutHinted(ctx context.Context, t *testing.T, mc *minio.Client, k block.Key, data []byte, meta map[string]string) {
	t.Helper()
	if _, err := mc.PutObject(ctx, k.Namespace, block.FormatHash(k.Hash), bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{UserMetadata: meta}); err != nil {
		t.Fatalf("S3 put %s: %v", k, err)
	}
}

// dialSessions dials ctxd's native port and fails t unless the server
// accepted agent sessions (read hints, session ids, END_SESSION). The
// client is closed when t ends.
func dialSessions(ctx context.Context, t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, addr, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.SessionsAccepted() {
		t.Fatal("ctxd did not accept agent sessions")
	}
	return c
}
