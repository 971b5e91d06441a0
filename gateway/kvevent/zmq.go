package kvevent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// endSeq is the replay stream's end marker: -1 as 8 big-endian bytes.
const endSeq = ^uint64(0)

// ParseFrames splits a ZMQ multipart message as vLLM's publisher sends it:
// [topic, seq, payload], where seq is 8 bytes big-endian, optionally followed
// by a 16-byte publisher stream id (publishers with a snapshot endpoint).
// Replay replies, [seq, payload] without the topic, are accepted too.
func ParseFrames(frames [][]byte) (Frame, error) {
	var f Frame
	switch len(frames) {
	case 3:
		f.Topic = string(frames[0])
		frames = frames[1:]
	case 2:
	default:
		return f, fmt.Errorf("%w: KV event message has %d frames, want [topic, seq, payload]", errcode.ErrMalformedFrame, len(frames))
	}
	seq := frames[0]
	if len(seq) != 8 && len(seq) != 24 {
		return f, fmt.Errorf("%w: KV event sequence frame is %d bytes, want 8 (or 8+16 with a stream id)", errcode.ErrMalformedFrame, len(seq))
	}
	f.Seq = binary.BigEndian.Uint64(seq[:8])
	if len(seq) == 24 {
		f.Stream = string(seq[8:])
	}
	f.Payload = frames[1]
	return f, nil
}

// SubscriberConfig is one publisher to subscribe to: one worker (one data
// parallel rank of an engine, each of which publishes on its own port).
type SubscriberConfig struct {
	Endpoint       string // the publisher's PUB endpoint, e.g. tcp://10.0.0.5:5557
	ReplayEndpoint string // its replay ROUTER endpoint, or "" for none
	Topic          string // topic prefix to subscribe to ("" for all)
	Namespace      string
	Worker         string
}

// Validate checks the configuration.
func (c SubscriberConfig) Validate() error {
	switch {
	case c.Endpoint == "":
		return fmt.Errorf("%w: KV event subscriber needs an endpoint", block.ErrInvalidArgument)
	case c.Worker == "":
		return fmt.Errorf("%w: KV event subscriber for %s needs a worker name", block.ErrInvalidArgument, c.Endpoint)
	}
	return block.ValidNamespaceName(c.Namespace)
}

// Subscribe receives a publisher's batches and applies them until ctx ends,
// dialing again after a failure. It returns ctx's error, or a configuration
// error at once.
func (in *Ingestor) Subscribe(ctx context.Context, cfg SubscriberConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	src := Source{Proto: "zmq", Namespace: cfg.Namespace, Worker: cfg.Worker}
	var rp Replayer
	if cfg.ReplayEndpoint != "" {
		rp = &zmqReplayer{endpoint: cfg.ReplayEndpoint}
	}
	for {
		err := in.subscribeOnce(ctx, cfg, src, rp)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		in.log.Warn("kvevent: subscriber disconnected; dialing again", "endpoint", cfg.Endpoint,
			"worker", cfg.Worker, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(in.cfg.ReconnectDelay):
		}
	}
}

func (in *Ingestor) subscribeOnce(ctx context.Context, cfg SubscriberConfig, src Source, rp Replayer) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := zmq4.NewSub(sctx, zmq4.WithDialerRetry(in.cfg.ReconnectDelay), zmq4.WithDialerMaxRetries(-1))
	defer sub.Close()
	if err := sub.Dial(cfg.Endpoint); err != nil {
		return err
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, cfg.Topic); err != nil {
		return err
	}
	in.log.Info("kvevent: subscribed", "endpoint", cfg.Endpoint, "namespace", cfg.Namespace, "worker", cfg.Worker)
	for {
		msg, err := sub.Recv()
		if err != nil {
			return err
		}
		f, err := ParseFrames(msg.Frames)
		if err != nil {
			in.m.batches.WithLabelValues(src.Proto, "malformed").Inc()
			in.log.Warn("kvevent: bad frame", "endpoint", cfg.Endpoint, "err", err)
			continue
		}
		if len(f.Payload) > in.cfg.MaxPayload {
			in.m.batches.WithLabelValues(src.Proto, "too_large").Inc()
			in.sink.MarkStale(src.Namespace, src.Worker)
			continue
		}
		if _, err := in.IngestFrame(ctx, src, f, rp); err != nil && !errors.Is(err, errcode.ErrMalformedFrame) {
			in.log.Warn("kvevent: batch rejected", "endpoint", cfg.Endpoint, "seq", f.Seq, "err", err)
		}
	}
}

// zmqReplayer asks vLLM's replay ROUTER socket for buffered batches: it sends
// [empty, 8-byte start seq] from a DEALER and reads [empty, (topic,) seq,
// payload] replies until the end marker (seq -1, empty payload).
type zmqReplayer struct {
	endpoint string
}

func (z *zmqReplayer) Replay(ctx context.Context, from uint64) ([]Frame, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dealer := zmq4.NewDealer(rctx, zmq4.WithDialerMaxRetries(0))
	defer dealer.Close()
	if err := dealer.Dial(z.endpoint); err != nil {
		return nil, err
	}
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], from)
	if err := dealer.Send(zmq4.NewMsgFrom([]byte{}, start[:])); err != nil {
		return nil, err
	}
	type recv struct {
		msg zmq4.Msg
		err error
	}
	ch := make(chan recv, 1)
	var out []Frame
	for {
		go func() {
			m, err := dealer.Recv()
			ch <- recv{m, err}
		}()
		var r recv
		select {
		case <-ctx.Done():
			dealer.Close()
			<-ch
			return out, ctx.Err()
		case r = <-ch:
		}
		if r.err != nil {
			return out, r.err
		}
		frames := r.msg.Frames
		if len(frames) > 0 && len(frames[0]) == 0 {
			frames = frames[1:] // the delimiter ROUTER keeps for a DEALER
		}
		f, err := ParseFrames(frames)
		if err != nil {
			return out, err
		}
		if f.Seq == endSeq {
			return out, nil
		}
		out = append(out, f)
	}
}
