package kvevent

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

func seqBytes(s uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], s)
	return b[:]
}

// replayServer plays vLLM's replay ROUTER: it reads [identity, "", start]
// and answers [identity, "", seq, payload] per buffered batch from start on,
// then [identity, "", -1, ""].
func replayServer(ctx context.Context, t *testing.T, rt zmq4.Socket, buffered map[uint64][]byte) {
	for ctx.Err() == nil {
		msg, err := rt.Recv()
		if err != nil {
			return
		}
		if len(msg.Frames) != 3 {
			t.Errorf("replay request has %d frames, want [identity, empty, start]", len(msg.Frames))
			return
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		for s := start; ; s++ {
			p, ok := buffered[s]
			if !ok {
				break
			}
			if err := rt.Send(zmq4.NewMsgFrom(id, []byte{}, seqBytes(s), p)); err != nil {
				return
			}
		}
		_ = rt.Send(zmq4.NewMsgFrom(id, []byte{}, seqBytes(endSeq), []byte{}))
	}
}

// TestZMQRoundTrip publishes vLLM-layout frames from a real zmq4 PUB socket on
// 127.0.0.1 to Subscribe, loses two batches on the way, and checks they are
// replayed from the ROUTER socket and everything lands in order.
func TestZMQRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	rt := zmq4.NewRouter(ctx, zmq4.WithID(zmq4.SocketIdentity("replay")))
	defer rt.Close()
	if err := rt.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	buffered := map[uint64][]byte{
		2: encStored(t, 2, "GPU", 3),
		3: encStored(t, 3, "GPU", 4),
	}
	go replayServer(ctx, t, rt, buffered)

	e := newEnv(t)
	cfg := SubscriberConfig{
		Endpoint:       "tcp://" + pub.Addr().String(),
		ReplayEndpoint: "tcp://" + rt.Addr().String(),
		Topic:          "kv",
		Namespace:      "m",
		Worker:         "w0",
	}
	done := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { done <- e.in.Subscribe(sctx, cfg) }()

	send := func(seq uint64, payload []byte) {
		t.Helper()
		if err := pub.Send(zmq4.NewMsgFrom([]byte("kv"), seqBytes(seq), payload)); err != nil {
			t.Fatal(err)
		}
	}
	// PUB drops what it sends before the subscription arrives: send batch 0
	// until it lands (a repeat of seq 0 counts as a restart and re-applies it).
	for {
		send(0, encStored(t, 0, "GPU", 1))
		if d, _ := e.depth(1); d == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("subscriber never received a batch")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// A frame on another topic is filtered out by the subscription.
	if err := pub.Send(zmq4.NewMsgFrom([]byte("other"), seqBytes(99), []byte{0xc1})); err != nil {
		t.Fatal(err)
	}
	send(1, encStored(t, 1, "GPU", 2))
	// 2 and 3 are lost on the way; 4 reveals the gap.
	send(4, encStored(t, 4, "GPU", 5))
	for {
		if d, stale := e.depth(1, 2, 3, 4, 5); d == 5 && !stale {
			break
		} else if stale {
			t.Fatalf("worker marked stale: the replay did not heal the gap (depth %d)", d)
		}
		select {
		case <-ctx.Done():
			d, _ := e.depth(1, 2, 3, 4, 5)
			t.Fatalf("timed out at depth %d", d)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := counter(t, e.reg, "ctxtier_kvevent_gaps_healed_total", "w0"); got != 1 {
		t.Fatalf("healed %v", got)
	}
	stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Subscribe returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Subscribe did not stop")
	}
}

func TestSubscriberConfigValidate(t *testing.T) {
	e := newEnv(t)
	for _, c := range []SubscriberConfig{
		{Worker: "w", Namespace: "m"},
		{Endpoint: "tcp://127.0.0.1:1", Namespace: "m"},
		{Endpoint: "tcp://127.0.0.1:1", Worker: "w", Namespace: "Bad"},
	} {
		if err := e.in.Subscribe(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
