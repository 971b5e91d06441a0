package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

func init() {
	register("stall", "stalled uploads: N native PUTs of SIZE that stop one byte short; peak RSS of the ctxd process (PID) against its RSS before", runStall)
}

// runStall opens --senders native connections to --addr, each announcing a
// PUT of --size bytes and sending all but the last byte, samples the VmRSS
// of --pid for --hold, and prints the RSS before and the peak (the ratio is
// the growth the stalled uploads caused). The connections are closed at the
// end.
func runStall(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("stall", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7400", "ctxd native address (--auth off)")
	pid := fs.Int("pid", 0, "ctxd's process id, for its VmRSS")
	senders := fs.Int("senders", 16, "stalled uploads")
	sizeS := fs.String("size", "60MiB", "block size of each upload")
	hold := fs.Duration("hold", 10*time.Second, "how long to sample RSS while the uploads stall")
	if err := fs.Parse(args); err != nil {
		return err
	}
	size, err := block.ParseSize(*sizeS)
	if err != nil || size < 2 || size > 1<<31 {
		return fmt.Errorf("stall: --size %q: want 2 bytes .. 2GiB", *sizeS)
	}
	if *pid <= 0 {
		return fmt.Errorf("stall: --pid is required")
	}
	before, err := rssMiB(*pid)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range *senders {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", *addr)
		if err != nil {
			return err
		}
		conns = append(conns, nc)
		if _, err := nc.Write(wire.AppendHello(nil, 1, 0)); err != nil {
			return err
		}
		if _, err := io.ReadFull(nc, make([]byte, wire.HelloReplySize)); err != nil {
			return fmt.Errorf("stall: handshake: %w", err)
		}
		if _, err := nc.Write(wire.AppendHeader(nil, wire.Header{Length: uint32(size), Op: wire.OpPut, ID: 1, Count: 1})); err != nil {
			return err
		}
		go func() {
			for sent := int64(0); sent < size-1; {
				n := min(int64(len(chunk)), size-1-sent)
				if _, err := nc.Write(chunk[:n]); err != nil {
					return // closed at the end
				}
				sent += n
			}
		}()
	}
	peak := before
	end := time.Now().Add(*hold)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if r, err := rssMiB(*pid); err == nil {
			peak = max(peak, r)
		}
	}
	fmt.Printf("stall: %d uploads of %s stopped one byte short: RSS %d MiB before, peak %d MiB (+%d MiB, %.1fx)\n",
		*senders, block.FormatSize(size), before, peak, peak-before, float64(peak)/float64(max(before, 1)))
	return nil
}

// rssMiB is the VmRSS of pid in MiB.
func rssMiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb >> 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
