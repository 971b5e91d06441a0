package kvevent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
)

// encStored builds a legacy (array_like) one-event batch payload storing
// hashes after parent (0: none) on medium.
func encStored(t testing.TB, parent uint64, medium string, hashes ...uint64) []byte {
	t.Helper()
	var hs string
	for _, h := range hashes {
		hs += fmt.Sprintf("cf %016x", h)
	}
	p := "c0"
	if parent != 0 {
		p = fmt.Sprintf("cf %016x", parent)
	}
	return hx(t, "92 00 91 97", str("BlockStored"), fmt.Sprintf("%02x", 0x90|len(hashes)), hs, p, "90 10 c0", str(medium))
}

func encCleared(t testing.TB) []byte {
	return hx(t, "92 00 91 91", str("AllBlocksCleared"))
}

type env struct {
	r   *router.Router
	in  *Ingestor
	reg *prometheus.Registry
	src Source
}

func newEnv(t testing.TB) *env {
	t.Helper()
	r, err := router.New(router.DefaultConfig(), router.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	in, err := New(DefaultConfig(), r, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{r: r, in: in, reg: reg, src: Source{Proto: "zmq", Namespace: "m", Worker: "w0"}}
}

func (e *env) frame(t testing.TB, seq uint64, payload []byte, rp Replayer) Result {
	t.Helper()
	res, err := e.in.IngestFrame(context.Background(), e.src, Frame{Seq: seq, Payload: payload}, rp)
	if err != nil {
		t.Fatalf("seq %d: %v", seq, err)
	}
	return res
}

// depth is the worker's Disk-level depth for hashes, and whether it is stale.
func (e *env) depth(hashes ...uint64) (int, bool) {
	idx, _ := e.r.Index("m", false)
	if idx == nil {
		return 0, false
	}
	for _, m := range idx.Match(hashes, nil) {
		if m.Worker == e.src.Worker {
			return m.Depth[router.Disk], m.Stale
		}
	}
	return 0, idx.Stale(e.src.Worker)
}

func TestInOrderAndGapMarksStale(t *testing.T) {
	e := newEnv(t)
	e.frame(t, 0, encStored(t, 0, "GPU", 1, 2), nil)
	if r := e.frame(t, 1, encStored(t, 2, "GPU", 3), nil); r.Verdict != "in_order" {
		t.Fatalf("verdict %s", r.Verdict)
	}
	// Batches 2..4 are lost.
	r := e.frame(t, 5, encStored(t, 3, "GPU", 4), nil)
	if r.Verdict != "gap" || r.Missing != 3 || !r.Stale {
		t.Fatalf("gap result %+v", r)
	}
	if d, stale := e.depth(1, 2, 3, 4); d != 4 || !stale {
		t.Fatalf("depth %d stale %v", d, stale)
	}
	if got := counter(t, e.reg, "ctxtier_kvevent_sequence_gaps_total", "w0"); got != 1 {
		t.Fatalf("gap metric %v", got)
	}
	if got := counter(t, e.reg, "ctxtier_kvevent_missed_batches_total", "w0"); got != 3 {
		t.Fatalf("missed metric %v", got)
	}
	// Stays stale through further in-order batches...
	e.frame(t, 6, encStored(t, 4, "GPU", 5), nil)
	if _, stale := e.depth(1); !stale {
		t.Fatal("stale mark lost")
	}
	// ...until AllBlocksCleared; fresh stores after it are trusted.
	e.frame(t, 7, encCleared(t), nil)
	e.frame(t, 8, encStored(t, 0, "GPU", 1), nil)
	if d, stale := e.depth(1, 2); d != 1 || stale {
		t.Fatalf("after clear: depth %d stale %v", d, stale)
	}
}

func TestDumpClearsStale(t *testing.T) {
	e := newEnv(t)
	e.frame(t, 0, encStored(t, 0, "GPU", 1, 2), nil)
	e.frame(t, 3, encStored(t, 2, "GPU", 3), nil) // gap
	dump := Batch{Events: []router.Event{{Kind: router.Stored, Hashes: []uint64{1, 7}, Medium: router.Host}}}
	res, err := e.in.ApplyDump(e.src, 10, true, "", dump)
	if err != nil || res.Applied != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if d, stale := e.depth(1, 7); d != 2 || stale {
		t.Fatalf("after dump: depth %d stale %v", d, stale)
	}
	if d, _ := e.depth(1, 2); d != 1 {
		t.Fatalf("pre-dump entry survived: %d", d)
	}
	// The dump's seq is the worker's position: 11 is in order.
	if r := e.frame(t, 11, encStored(t, 7, "GPU", 8), nil); r.Verdict != "in_order" {
		t.Fatalf("after dump %s", r.Verdict)
	}
	// A dump must hold only stores.
	if _, err := e.in.ApplyDump(e.src, 0, false, "", Batch{Events: []router.Event{{Kind: router.Cleared}}}); err == nil {
		t.Fatal("dump with a clear accepted")
	}
}

func TestRestartAndDuplicate(t *testing.T) {
	e := newEnv(t)
	for seq := range uint64(5) {
		e.frame(t, seq, encStored(t, seq, "GPU", seq+1), nil)
	}
	if d, _ := e.depth(1, 2, 3, 4, 5); d != 5 {
		t.Fatalf("depth %d", d)
	}
	// The last batch again (a retry) changes nothing.
	if r := e.frame(t, 4, encStored(t, 4, "GPU", 5), nil); r.Verdict != "duplicate" || r.Applied != 0 {
		t.Fatalf("duplicate: %+v", r)
	}
	// The sequence starts over: the engine restarted with an empty cache.
	if r := e.frame(t, 0, encStored(t, 0, "GPU", 9), nil); r.Verdict != "restart" {
		t.Fatalf("restart: %+v", r)
	}
	if d, _ := e.depth(1); d != 0 {
		t.Fatalf("pre-restart entries kept: %d", d)
	}
	if d, stale := e.depth(9); d != 1 || stale {
		t.Fatalf("post-restart: %d %v", d, stale)
	}
	// A new publisher stream id is a restart too, whatever the number.
	res, err := e.in.IngestFrame(context.Background(), e.src, Frame{Seq: 1, Stream: "new-stream-id-16", Payload: encStored(t, 0, "GPU", 10)}, nil)
	if err != nil || res.Verdict != "restart" {
		t.Fatalf("stream change: %+v %v", res, err)
	}
	if got := counter(t, e.reg, "ctxtier_kvevent_worker_restarts_total", "w0"); got != 2 {
		t.Fatalf("restart metric %v", got)
	}
}

// fakeReplayer serves stored frames from a sequence on.
type fakeReplayer struct {
	frames []Frame
	err    error
	asked  []uint64
}

func (f *fakeReplayer) Replay(_ context.Context, from uint64) ([]Frame, error) {
	f.asked = append(f.asked, from)
	var out []Frame
	for _, fr := range f.frames {
		if fr.Seq >= from {
			out = append(out, fr)
		}
	}
	return out, f.err
}

func TestGapHealedByReplay(t *testing.T) {
	e := newEnv(t)
	rp := &fakeReplayer{frames: []Frame{
		{Seq: 1, Payload: encStored(t, 1, "GPU", 2)},
		{Seq: 2, Payload: encStored(t, 2, "GPU", 3)},
		{Seq: 3, Payload: encStored(t, 3, "GPU", 4)}, // the batch that revealed the gap: not reapplied
	}}
	e.frame(t, 0, encStored(t, 0, "GPU", 1), rp)
	r := e.frame(t, 3, encStored(t, 3, "GPU", 4), rp)
	if r.Verdict != "gap" || r.Missing != 2 || r.Replayed != 2 || r.Stale {
		t.Fatalf("%+v", r)
	}
	if fmt.Sprint(rp.asked) != "[1]" {
		t.Fatalf("asked %v", rp.asked)
	}
	// Replayed batches came in order before batch 3, so 4's parent was known.
	if d, stale := e.depth(1, 2, 3, 4); d != 4 || stale {
		t.Fatalf("depth %d stale %v", d, stale)
	}
	if got := counter(t, e.reg, "ctxtier_kvevent_gaps_healed_total", "w0"); got != 1 {
		t.Fatalf("healed metric %v", got)
	}

	// A replay that falls short (the publisher's buffer moved on) leaves the worker stale.
	e2 := newEnv(t)
	short := &fakeReplayer{frames: []Frame{{Seq: 2, Payload: encStored(t, 2, "GPU", 3)}}}
	e2.frame(t, 0, encStored(t, 0, "GPU", 1), short)
	if r := e2.frame(t, 3, encStored(t, 3, "GPU", 4), short); r.Replayed != 0 || !r.Stale {
		t.Fatalf("short replay %+v", r)
	}
	// And a failing one too.
	e3 := newEnv(t)
	bad := &fakeReplayer{err: errors.New("no route")}
	e3.frame(t, 0, encStored(t, 0, "GPU", 1), bad)
	if r := e3.frame(t, 2, encStored(t, 1, "GPU", 2), bad); !r.Stale {
		t.Fatalf("failed replay %+v", r)
	}
}

func TestMalformedBatchMarksStale(t *testing.T) {
	e := newEnv(t)
	e.frame(t, 0, encStored(t, 0, "GPU", 1), nil)
	if _, err := e.in.IngestFrame(context.Background(), e.src, Frame{Seq: 1, Payload: []byte{0xc1}}, nil); err == nil {
		t.Fatal("malformed payload accepted")
	}
	if d, stale := e.depth(1); d != 1 || !stale {
		t.Fatalf("depth %d stale %v", d, stale)
	}
	// The bad batch consumed its number: 2 is in order.
	if r := e.frame(t, 2, encStored(t, 1, "GPU", 2), nil); r.Verdict != "in_order" {
		t.Fatalf("%+v", r)
	}
}

func TestDecodeJSON(t *testing.T) {
	body := `{"namespace":"m","worker":"w0","seq":7,"ts":1.5,"data_parallel_rank":0,
	  "events":[
	    {"type":"BlockStored","block_hashes":[18446744073709551615,"00000000000000ff",-2],
	     "parent_block_hash":null,"token_ids":[1,2],"block_size":16,"lora_id":null,"medium":"GPU"},
	    {"type":"BlockRemoved","block_hashes":[1],"medium":"CPU"},
	    {"type":"SomethingNew"},
	    {"type":"AllBlocksCleared"}],
	  "load":{"active_prefill_blocks":3,"active_decode_blocks":9}}`
	env, err := DecodeJSON(strings.NewReader(body), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if env.Worker != "w0" || env.Namespace != "m" || !env.HasSeq || env.Seq != 7 || env.Batch.Skipped != 1 ||
		env.Load == nil || env.Load.DecodeBlocks != 9 {
		t.Fatalf("%+v", env)
	}
	evs := env.Batch.Events
	if len(evs) != 3 || fmt.Sprint(evs[0].Hashes) != fmt.Sprint([]uint64{^uint64(0), 255, ^uint64(1)}) ||
		evs[1].Medium != router.Host || evs[2].Kind != router.Cleared {
		t.Fatalf("events %+v", evs)
	}
	for name, bad := range map[string]string{
		"no worker":      `{"events":[]}`,
		"bad hash":       `{"worker":"w","events":[{"type":"BlockRemoved","block_hashes":[1.5]}]}`,
		"short hex":      `{"worker":"w","events":[{"type":"BlockRemoved","block_hashes":["ff"]}]}`,
		"huge":           `{"worker":"w","events":[{"type":"BlockRemoved","block_hashes":[18446744073709551616]}]}`,
		"bad medium":     `{"worker":"w","events":[{"type":"BlockRemoved","block_hashes":[1],"medium":"tape"}]}`,
		"no type":        `{"worker":"w","events":[{"block_hashes":[1]}]}`,
		"trailing":       `{"worker":"w"} {}`,
		"bad namespace":  `{"worker":"w","namespace":"Bad NS"}`,
		"negative rank":  `{"worker":"w","data_parallel_rank":-1}`,
		"not json":       `{`,
		"trailing brace": `{"worker":"w"} }`,
		"two objects":    `{"worker":"w"} {"worker":"w"}`,
	} {
		if _, err := DecodeJSON(strings.NewReader(bad), 1<<20); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := DecodeJSON(strings.NewReader(body), 10); err == nil {
		t.Error("over-size body accepted")
	}
}

// FuzzDecodeJSON: any body is rejected with InvalidArgument (or TooLarge),
// or it is one JSON object whose envelope keeps what DecodeJSON promises: a
// worker, a valid namespace, a non-negative rank, and every event of the
// input either decoded to a known kind with its hashes or counted skipped.
func FuzzDecodeJSON(f *testing.F) {
	f.Add(`{"worker":"w","events":[{"type":"BlockStored","block_hashes":[1,"00000000000000ff"],"medium":"GPU"}]}`)
	f.Add(`{"worker":"w","load":{"active_prefill_blocks":1}}`)
	f.Add(`{"worker":"w","namespace":"t1","data_parallel_rank":2,"seq":7,"events":[{"type":"BlockRemoved","block_hashes":[3]},{"type":"AllBlocksCleared"},{"type":"Future"}]}`)
	f.Add(`{"worker":"w","events":[{"type":"BlockStored","block_hashes":[1],"parent_block_hash":"x"}]}`)
	f.Add(`{"worker":"","events":[]}`)
	f.Add(`{"worker":"w"} {"worker":"w"}`)
	f.Fuzz(func(t *testing.T, s string) {
		env, err := DecodeJSON(strings.NewReader(s), 1<<16)
		if err != nil {
			if !errors.Is(err, block.ErrInvalidArgument) && !errors.Is(err, block.ErrTooLarge) {
				t.Fatalf("error %v is neither InvalidArgument nor TooLarge", err)
			}
			return
		}
		if env.Worker == "" || env.Proto != "http" {
			t.Fatalf("accepted envelope without a worker or with proto %q", env.Proto)
		}
		if block.ValidNamespaceName(env.Namespace) != nil {
			t.Fatalf("accepted namespace %q", env.Namespace)
		}
		if env.Batch.HasDPRank && env.Batch.DPRank < 0 {
			t.Fatalf("accepted rank %d", env.Batch.DPRank)
		}
		var raw struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			t.Fatalf("accepted a body encoding/json rejects: %v", err)
		}
		if got := len(env.Batch.Events) + env.Batch.Skipped; got != len(raw.Events) {
			t.Fatalf("%d events in, %d decoded + %d skipped", len(raw.Events), len(env.Batch.Events), env.Batch.Skipped)
		}
		for i, ev := range env.Batch.Events {
			switch ev.Kind {
			case router.Stored, router.Removed:
			case router.Cleared:
				continue
			default:
				t.Fatalf("event %d: kind %d", i, ev.Kind)
			}
			var one struct {
				Hashes []json.RawMessage `json:"block_hashes"`
			}
			_ = json.Unmarshal(raw.Events[i], &one)
			if len(ev.Hashes) != len(one.Hashes) && env.Batch.Skipped == 0 {
				t.Fatalf("event %d: %d hashes in, %d decoded", i, len(one.Hashes), len(ev.Hashes))
			}
		}
	})
}

// series is worker's sample of the family name, nil when it has none.
func series(t *testing.T, reg *prometheus.Registry, name, worker string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "worker" && l.GetValue() == worker {
					return m
				}
			}
		}
	}
	return nil
}

// counter is a per-worker counter's value (0 without a series).
func counter(t *testing.T, reg *prometheus.Registry, name, worker string) float64 {
	t.Helper()
	return series(t, reg, name, worker).GetCounter().GetValue()
}

// gauge is a per-worker gauge's value, and whether the series exists.
func gauge(t *testing.T, reg *prometheus.Registry, name, worker string) (float64, bool) {
	t.Helper()
	m := series(t, reg, name, worker)
	return m.GetGauge().GetValue(), m != nil
}

// TestLagGauges checks ctxtier_kvevent_lag_seconds (apply time minus the
// engine's ts of the newest batch applied) and
// ctxtier_kvevent_last_applied_timestamp_seconds on a fixed clock.
func TestLagGauges(t *testing.T) {
	clock := time.Unix(1_800_000_000, 250_000_000)
	stored := func(hashes ...uint64) []router.Event {
		return []router.Event{{Kind: router.Stored, Hashes: hashes, Medium: router.Device}}
	}
	type step struct {
		seq     uint64
		ts      float64 // the batch's engine timestamp (0: none)
		dump    bool
		advance time.Duration // the clock moves this much before the batch
	}
	for _, tc := range []struct {
		name        string
		steps       []step
		wantLag     float64 // -1: no lag series
		wantApplied time.Duration
	}{
		{name: "stamped batch", steps: []step{{seq: 0, ts: 1_800_000_000 - 2.75}}, wantLag: 3},
		{name: "newest batch wins", steps: []step{{seq: 0, ts: 1_800_000_000 - 30}, {seq: 1, ts: 1_800_000_000.25 - 0.5, advance: 0}}, wantLag: 0.5},
		{name: "clock moves", steps: []step{{seq: 0, ts: 1_800_000_000}, {seq: 1, ts: 1_800_000_001, advance: 4 * time.Second}}, wantLag: 3.25, wantApplied: 4 * time.Second},
		{name: "unstamped batch keeps the lag", steps: []step{{seq: 0, ts: 1_800_000_000 - 1}, {seq: 1, advance: time.Second}}, wantLag: 1.25, wantApplied: time.Second},
		{name: "no stamp ever", steps: []step{{seq: 0}}, wantLag: -1},
		{name: "engine clock ahead reads zero", steps: []step{{seq: 0, ts: 1_800_000_100}}, wantLag: 0},
		{name: "dump", steps: []step{{seq: 0, ts: 1_800_000_000 - 60}, {seq: 5, ts: 1_800_000_000 - 10, dump: true, advance: 0}}, wantLag: 10.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			now := clock
			e.in.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				b := Batch{TS: s.ts, Events: stored(uint64(10 + i))}
				var err error
				if s.dump {
					_, err = e.in.ApplyDump(e.src, s.seq, true, "", b)
				} else {
					_, err = e.in.Ingest(context.Background(), e.src, s.seq, true, "", b, nil)
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			lag, ok := gauge(t, e.reg, "ctxtier_kvevent_lag_seconds", "w0")
			switch {
			case tc.wantLag < 0 && ok:
				t.Fatalf("lag %v exported for a stream without timestamps", lag)
			case tc.wantLag >= 0 && (!ok || math.Abs(lag-tc.wantLag) > 1e-6):
				t.Fatalf("lag %v (exported %v), want %v", lag, ok, tc.wantLag)
			}
			at, ok := gauge(t, e.reg, "ctxtier_kvevent_last_applied_timestamp_seconds", "w0")
			want := float64(clock.Add(tc.wantApplied).UnixNano()) / 1e9
			if !ok || math.Abs(at-want) > 1e-6 {
				t.Fatalf("last applied %v (exported %v), want %v", at, ok, want)
			}
		})
	}
}

// TestLagAfterReplay: a healed gap applies the replayed (older) batches
// first and the batch that revealed the gap last, so the lag is that of
// the newest batch.
func TestLagAfterReplay(t *testing.T) {
	e := newEnv(t)
	now := time.Unix(1_800_000_000, 0)
	e.in.now = func() time.Time { return now }
	// Replayed frames are msgpack with ts 0 (encStored): they set no lag.
	rp := &fakeReplayer{frames: []Frame{{Seq: 1, Payload: encStored(t, 1, "GPU", 2)}}}
	if _, err := e.in.Ingest(context.Background(), e.src, 0, true, "", Batch{TS: 1_800_000_000 - 50,
		Events: []router.Event{{Kind: router.Stored, Hashes: []uint64{1}, Medium: router.Device}}}, rp); err != nil {
		t.Fatal(err)
	}
	r, err := e.in.Ingest(context.Background(), e.src, 2, true, "", Batch{TS: 1_800_000_000 - 7,
		Events: []router.Event{{Kind: router.Stored, Hashes: []uint64{3}, Parent: 2, HasParent: true, Medium: router.Device}}}, rp)
	if err != nil || r.Replayed != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if lag, ok := gauge(t, e.reg, "ctxtier_kvevent_lag_seconds", "w0"); !ok || lag != 7 {
		t.Fatalf("lag %v (%v), want 7", lag, ok)
	}
}
