package kvevent

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
)

// Sink is what events are applied to; *router.Router satisfies it.
type Sink interface {
	Apply(ns, worker string, evs []router.Event) (router.ApplyStats, error)
	ReplaceWorker(ns, worker string, dump []router.Event) (router.ApplyStats, error)
	ClearWorker(ns, worker string) int
	MarkStale(ns, worker string)
	ReportLoad(ns, worker string, l router.Load) error
}

// Config configures an Ingestor.
type Config struct {
	// MaxPayload bounds one batch's encoded size (msgpack or JSON).
	MaxPayload int
	// ReplayTimeout bounds one replay request to a publisher.
	ReplayTimeout time.Duration
	// ReconnectDelay is the pause before a ZMQ subscriber dials again.
	ReconnectDelay time.Duration
}

// DefaultConfig returns the ingest defaults.
func DefaultConfig() Config {
	return Config{MaxPayload: 64 << 20, ReplayTimeout: 2 * time.Second, ReconnectDelay: time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.MaxPayload <= 0:
		return fmt.Errorf("%w: kvevent max_payload must be positive", block.ErrInvalidArgument)
	case c.ReplayTimeout <= 0:
		return fmt.Errorf("%w: kvevent replay_timeout must be positive", block.ErrInvalidArgument)
	case c.ReconnectDelay <= 0:
		return fmt.Errorf("%w: kvevent reconnect_delay must be positive", block.ErrInvalidArgument)
	}
	return nil
}

// Replayer fetches a publisher's buffered batches from sequence from on, in
// order (vLLM's replay ROUTER socket).
type Replayer interface {
	Replay(ctx context.Context, from uint64) ([]Frame, error)
}

// Frame is one sequenced batch as it came off the wire.
type Frame struct {
	Topic   string
	Seq     uint64
	Stream  string // the publisher's stream id, when it sends one
	Payload []byte
}

// Ingestor applies sequenced batches to a Sink, per worker in order.
type Ingestor struct {
	cfg  Config
	sink Sink
	log  *slog.Logger
	m    *metrics
	now  func() time.Time // the clock of the lag gauges (tests replace it)

	mu      sync.Mutex
	workers map[wkey]*workerSeq
}

type wkey struct{ ns, worker string }

// workerSeq serializes one worker's batches: the worker's single writer.
type workerSeq struct {
	mu  sync.Mutex
	seq seqState
}

// New returns an Ingestor; reg may be nil (no metrics), log may be nil.
func New(cfg Config, sink Sink, reg prometheus.Registerer, log *slog.Logger) (*Ingestor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, fmt.Errorf("%w: kvevent needs a sink", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ingestor{cfg: cfg, sink: sink, log: log, m: newMetrics(reg), now: time.Now, workers: map[wkey]*workerSeq{}}, nil
}

// Config returns the ingestor's configuration.
func (in *Ingestor) Config() Config { return in.cfg }

func (in *Ingestor) worker(ns, w string) *workerSeq {
	in.mu.Lock()
	defer in.mu.Unlock()
	k := wkey{ns, w}
	s := in.workers[k]
	if s == nil {
		s = &workerSeq{}
		in.workers[k] = s
	}
	return s
}

// Source names where batches come from, for metrics and logs, and which
// worker of which namespace they describe.
type Source struct {
	Proto     string // "zmq" or "http"
	Namespace string
	Worker    string
}

// Result says what one batch did.
type Result struct {
	Verdict  string `json:"sequence"`
	Missing  uint64 `json:"missing,omitempty"`
	Replayed int    `json:"replayed,omitempty"`
	Stale    bool   `json:"stale,omitempty"`
	Applied  int    `json:"applied_events"`
	Skipped  int    `json:"skipped_events,omitempty"`
	Orphans  int    `json:"orphan_blocks,omitempty"`
}

// IngestFrame decodes and applies one ZMQ frame's payload.
func (in *Ingestor) IngestFrame(ctx context.Context, src Source, f Frame, rp Replayer) (Result, error) {
	b, err := DecodeBatch(f.Payload)
	if err != nil {
		// The batch's events are lost: the worker's view can no longer be trusted.
		in.m.batches.WithLabelValues(src.Proto, "malformed").Inc()
		ws := in.worker(src.Namespace, src.Worker)
		ws.mu.Lock()
		ws.seq.advance(f.Seq, f.Stream)
		ws.mu.Unlock()
		in.sink.MarkStale(src.Namespace, src.Worker)
		in.log.Warn("kvevent: malformed batch; worker marked stale", "proto", src.Proto,
			"namespace", src.Namespace, "worker", src.Worker, "seq", f.Seq, "err", err)
		return Result{Stale: true}, err
	}
	return in.Ingest(ctx, src, f.Seq, true, f.Stream, b, rp)
}

// Ingest applies one decoded batch. With hasSeq, the sequence number is
// checked: a gap is replayed through rp when it is not nil, and otherwise
// (or when the replay falls short) marks the worker stale; a restart clears
// the worker first; a duplicate of the last batch is ignored.
func (in *Ingestor) Ingest(ctx context.Context, src Source, seq uint64, hasSeq bool, stream string, b Batch, rp Replayer) (Result, error) {
	if src.Worker == "" {
		return Result{}, fmt.Errorf("%w: KV events need a worker name", block.ErrInvalidArgument)
	}
	ws := in.worker(src.Namespace, src.Worker)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var res Result
	if hasSeq {
		v, missing := ws.seq.observe(seq, stream)
		res.Verdict = v.String()
		switch v {
		case seqDuplicate:
			in.m.batches.WithLabelValues(src.Proto, "duplicate").Inc()
			return res, nil
		case seqRestart:
			n := in.sink.ClearWorker(src.Namespace, src.Worker)
			in.m.restarts.WithLabelValues(src.Namespace, src.Worker).Inc()
			in.log.Info("kvevent: worker restarted; its entries dropped", "proto", src.Proto,
				"namespace", src.Namespace, "worker", src.Worker, "seq", seq, "dropped", n)
		case seqGap:
			res.Missing = seq - missing
			in.m.gaps.WithLabelValues(src.Namespace, src.Worker).Inc()
			in.m.missed.WithLabelValues(src.Namespace, src.Worker).Add(float64(res.Missing))
			res.Replayed = in.replay(ctx, src, ws, rp, missing, seq, stream)
			if uint64(res.Replayed) == res.Missing {
				in.m.healed.WithLabelValues(src.Namespace, src.Worker).Inc()
				in.log.Info("kvevent: sequence gap healed by replay", "proto", src.Proto,
					"namespace", src.Namespace, "worker", src.Worker, "from", missing, "to", seq-1)
			} else {
				in.sink.MarkStale(src.Namespace, src.Worker)
				res.Stale = true
				in.log.Warn("kvevent: sequence gap; worker marked stale until a full dump or AllBlocksCleared",
					"proto", src.Proto, "namespace", src.Namespace, "worker", src.Worker,
					"expected", missing, "got", seq, "missing", res.Missing, "replayed", res.Replayed)
			}
		}
	}
	if err := in.apply(src, b, &res); err != nil {
		return res, err
	}
	if hasSeq {
		ws.seq.advance(seq, stream)
	}
	return res, nil
}

// replay fetches and applies the batches [from, upto) and returns how many
// contiguous ones it applied.
func (in *Ingestor) replay(ctx context.Context, src Source, ws *workerSeq, rp Replayer, from, upto uint64, stream string) int {
	if rp == nil {
		return 0
	}
	rctx, cancel := context.WithTimeout(ctx, in.cfg.ReplayTimeout)
	defer cancel()
	frames, err := rp.Replay(rctx, from)
	if err != nil {
		in.log.Warn("kvevent: replay failed", "namespace", src.Namespace, "worker", src.Worker, "from", from, "err", err)
		return 0
	}
	next, n := from, 0
	for _, f := range frames {
		if f.Seq < next {
			continue
		}
		if f.Seq != next || f.Seq >= upto {
			break
		}
		b, err := DecodeBatch(f.Payload)
		if err != nil {
			in.m.batches.WithLabelValues("replay", "malformed").Inc()
			break
		}
		var r Result
		if err := in.apply(Source{Proto: "replay", Namespace: src.Namespace, Worker: src.Worker}, b, &r); err != nil {
			break
		}
		ws.seq.advance(f.Seq, stream)
		next++
		n++
	}
	return n
}

func (in *Ingestor) apply(src Source, b Batch, res *Result) error {
	res.Skipped += b.Skipped
	if b.Skipped > 0 {
		in.m.skipped.Add(float64(b.Skipped))
	}
	// An AllBlocksCleared makes the worker's view exact again: what follows
	// it in the batch, and later, is all there is.
	events := b.Events
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == router.Cleared {
			in.sink.ClearWorker(src.Namespace, src.Worker)
			events = events[i+1:]
			break
		}
	}
	st, err := in.sink.Apply(src.Namespace, src.Worker, events)
	if err != nil {
		in.m.batches.WithLabelValues(src.Proto, "rejected").Inc()
		return err
	}
	in.m.batches.WithLabelValues(src.Proto, "ok").Inc()
	in.applied(src, b.TS)
	for _, ev := range b.Events {
		in.m.events.WithLabelValues(ev.Kind.String()).Inc()
	}
	in.m.orphans.Add(float64(st.Orphans))
	res.Applied += len(b.Events)
	res.Orphans += st.Orphans
	return nil
}

// ApplyDump replaces a worker's entries with a full dump (BlockStored events)
// and clears its stale mark; seq, when given, becomes the worker's position.
func (in *Ingestor) ApplyDump(src Source, seq uint64, hasSeq bool, stream string, b Batch) (Result, error) {
	if src.Worker == "" {
		return Result{}, fmt.Errorf("%w: a dump needs a worker name", block.ErrInvalidArgument)
	}
	for i, ev := range b.Events {
		if ev.Kind != router.Stored {
			return Result{}, fmt.Errorf("%w: dump event %d is %s; a dump holds BlockStored events only", block.ErrInvalidArgument, i, ev.Kind)
		}
	}
	ws := in.worker(src.Namespace, src.Worker)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	st, err := in.sink.ReplaceWorker(src.Namespace, src.Worker, b.Events)
	if err != nil {
		return Result{}, err
	}
	in.m.dumps.Inc()
	in.applied(src, b.TS)
	if hasSeq {
		ws.seq.advance(seq, stream)
	}
	return Result{Verdict: "dump", Applied: len(b.Events), Orphans: st.Orphans}, nil
}

// applied records that a batch of src's worker, stamped ts by the engine
// (seconds since the Unix epoch, 0: none), is now in the index: the time
// of it, and the lag, the apply time minus ts. A replay applies batches in
// order, so the gauges end on the newest batch. Only a stamped batch
// moves the lag; a negative one (the engine's clock ahead of this node's)
// reads 0.
func (in *Ingestor) applied(src Source, ts float64) {
	now := float64(in.now().UnixNano()) / 1e9
	in.m.lastApplied.WithLabelValues(src.Namespace, src.Worker).Set(now)
	if ts > 0 && !math.IsInf(ts, 0) {
		in.m.lag.WithLabelValues(src.Namespace, src.Worker).Set(max(now-ts, 0))
	}
}

// ReportLoad passes a worker's load report on.
func (in *Ingestor) ReportLoad(src Source, l router.Load) error {
	if err := in.sink.ReportLoad(src.Namespace, src.Worker, l); err != nil {
		return err
	}
	in.m.loads.Inc()
	return nil
}

type metrics struct {
	batches  *prometheus.CounterVec
	events   *prometheus.CounterVec
	gaps     *prometheus.CounterVec
	missed   *prometheus.CounterVec
	healed   *prometheus.CounterVec
	restarts *prometheus.CounterVec
	// lag and lastApplied are per worker: the apply time minus the engine
	// timestamp of the newest batch applied, and that apply time.
	lag         *prometheus.GaugeVec
	lastApplied *prometheus.GaugeVec
	skipped     prometheus.Counter
	orphans     prometheus.Counter
	dumps       prometheus.Counter
	loads       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "batches_total", Help: "KV event batches by source protocol and outcome."}, []string{"proto", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "events_total", Help: "KV events applied, by kind."}, []string{"kind"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "sequence_gaps_total", Help: "Sequence gaps detected, per worker."}, []string{"namespace", "worker"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "missed_batches_total", Help: "Batches missing in sequence gaps, per worker."}, []string{"namespace", "worker"}),
		healed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "gaps_healed_total", Help: "Sequence gaps filled by replay, per worker."}, []string{"namespace", "worker"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "worker_restarts_total", Help: "Publisher restarts (sequence reset), per worker."}, []string{"namespace", "worker"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "lag_seconds", Help: "How far the router's index was behind the worker's KV-event stream: the time the newest batch was applied minus the engine's timestamp (ts) on it, per worker (only batches with a ts; clocks assumed in sync, a negative value reads 0)."},
			[]string{"namespace", "worker"}),
		lastApplied: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "last_applied_timestamp_seconds", Help: "When the worker's newest KV-event batch or dump was applied (Unix seconds), per worker."},
			[]string{"namespace", "worker"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "skipped_events_total", Help: "Events of unknown kinds or non-zero KV-cache groups, not indexed."}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "orphan_blocks_total", Help: "Stored blocks dropped because their parent was not indexed for the worker."}),
		dumps: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "dumps_total", Help: "Full worker dumps applied."}),
		loads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ctxtier", Subsystem: "kvevent",
			Name: "load_reports_total", Help: "Worker load reports received."}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.events, m.gaps, m.missed, m.healed, m.restarts, m.lag, m.lastApplied, m.skipped, m.orphans, m.dumps, m.loads)
	}
	return m
}
