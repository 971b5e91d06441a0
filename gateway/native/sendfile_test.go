package native_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// TestGetSendfile reads blocks of several sizes from the real DRAM tier in
// one batch GET (with a missing key in the middle), with Config.Sendfile on
// and off: the bytes, sums and statuses must be the same either way, the
// sums the ones recorded at put, and every lease must end.
func TestGetSendfile(t *testing.T) {
	sizes := []int{1, 4095, 4097, 100_000, 1 << 20}
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "sendfile", false: "writev"}[on]
		t.Run(name, func(t *testing.T) {
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			dcfg := dram.DefaultConfig()
			dcfg.Capacity = 16 << 20
			m, err := tiers.New(tiers.DefaultConfig(), dcfg, nil, log)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			cfg := smallConfig()
			cfg.Sendfile = on
			srv, err := nativetest.StartWithTier(t, cfg, m)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := dialRaw(t, srv.Addr, wire.Version)
			var keys []block.Key
			var want [][]byte
			for i, n := range sizes {
				k := block.NewKey("default", uint64(100+i))
				data := make([]byte, n)
				for j := range data {
					data[j] = byte(j*31 + i)
				}
				r.send(frame(wire.OpPut, uint64(i+1), 1, putBody("default", k, data, block.Checksum(data))))
				if resp := r.recv(); resp.Code != errcode.OK || resp.Items[0].Code != errcode.OK {
					t.Fatalf("put %d: %+v", n, resp)
				}
				keys = append(keys, k)
				want = append(want, data)
				if i == 1 {
					keys = append(keys, block.NewKey("default", 999))
					want = append(want, nil)
				}
			}
			// Twice, pipelined, so responses queue behind each other.
			for id := uint64(50); id < 52; id++ {
				r.send(frame(wire.OpGet, id, uint32(len(keys)), keyBody("default", keys...)))
			}
			for id := uint64(50); id < 52; id++ {
				resp := r.recv()
				if resp.ID != id || len(resp.Items) != len(keys) {
					t.Fatalf("response %d: id %d, %d items", id, resp.ID, len(resp.Items))
				}
				for i, it := range resp.Items {
					if want[i] == nil {
						if it.Code != errcode.NotFound {
							t.Fatalf("missing key: %v", it.Code)
						}
						continue
					}
					if it.Code != errcode.OK || !bytes.Equal(it.Data, want[i]) || it.Sum != block.Checksum(want[i]) || it.DataSum != it.Sum {
						t.Fatalf("item %d (%d bytes): code %v, %d bytes, equal %v, sum %08x data %08x", i, len(want[i]), it.Code, len(it.Data), bytes.Equal(it.Data, want[i]), it.Sum, it.DataSum)
					}
				}
			}
			// Every lease ends once its response is written: deleted
			// blocks then free their pages (a leased one would keep them).
			for i, k := range keys {
				if want[i] != nil {
					if err := m.DRAM().Delete(context.Background(), k); err != nil {
						t.Fatal(err)
					}
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for m.DRAM().Stats().AllocatedB != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d bytes still allocated: a lease was not released", m.DRAM().Stats().AllocatedB)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
