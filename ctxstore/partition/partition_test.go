package partition

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
)

func members(n int) []placement.Node {
	out := make([]placement.Node, n)
	for i := range out {
		out[i] = placement.Node{ID: fmt.Sprintf("m%d", i+1), Zone: "z"}
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		ok    bool
	}{
		{"default", func(*Config) {}, true},
		{"one partition, one replica", func(c *Config) { c.Partitions, c.Replicas = 1, 1 }, true},
		{"no partitions", func(c *Config) { c.Partitions = 0 }, false},
		{"too many partitions", func(c *Config) { c.Partitions = maxPartitions + 1 }, false},
		{"no replicas", func(c *Config) { c.Replicas = 0 }, false},
		{"eight replicas", func(c *Config) { c.Replicas = 8 }, false},
		{"no leader timeout", func(c *Config) { c.LeaderTimeout = 0 }, false},
		{"bad group template", func(c *Config) { c.Group.HeartbeatTimeout = time.Millisecond }, false},
		{"bad group batch", func(c *Config) { c.Group.Batch.MaxOps = 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.tweak(&c)
			err := c.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("Validate() = %v, want block.ErrInvalidArgument", err)
			}
		})
	}
}

func TestOf(t *testing.T) {
	for _, p := range []int{1, 7, 64, 4096} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			c := DefaultConfig()
			c.Partitions = p
			r := rand.New(rand.NewPCG(1, uint64(p)))
			count := make([]int, p)
			const n = 20000
			for range n {
				k := block.NewKey("ns", r.Uint64())
				got := c.Of(k)
				if got < 0 || got >= p {
					t.Fatalf("Of(%v) = %d, outside 0..%d", k, got, p-1)
				}
				// The shard does not move a key; the namespace and the
				// part are part of what is hashed.
				if c.Of(k.WithShard(2)) != got {
					t.Fatalf("Of(%v) differs from the whole block's", k.WithShard(2))
				}
				if want := int(placement.KeyHash(k) % uint64(p)); got != want {
					t.Fatalf("Of(%v) = %d, want KeyHash mod P = %d", k, got, want)
				}
				count[got]++
			}
			if p <= 64 {
				mean := float64(n) / float64(p)
				for i, c := range count {
					if float64(c) < 0.8*mean || float64(c) > 1.2*mean {
						t.Fatalf("partition %d got %d keys of %d, mean %.0f: not spread", i, c, n, mean)
					}
				}
			}
		})
	}
	c := DefaultConfig()
	same := 0
	for h := range uint64(1000) {
		if c.Of(block.NewKey("a", h)) == c.Of(block.NewKey("b", h)) {
			same++
		}
		if c.Of(block.NewKey("a", h)) == c.Of(block.NewKey("a", h).WithPart(1)) {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("namespace or part changed the partition of only %d of 2000 keys", 2000-same)
	}
}

func TestVoters(t *testing.T) {
	c := DefaultConfig()
	c.Partitions = 256
	ms := members(10)
	for _, tc := range []struct {
		name    string
		p       int
		members []placement.Node
		want    error
	}{
		{"first", 0, ms, nil},
		{"last", 255, ms, nil},
		{"negative", -1, ms, ErrUnknownPartition},
		{"past the end", 256, ms, ErrUnknownPartition},
		{"too few members", 3, ms[:2], block.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := c.Voters(tc.p, tc.members)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Voters(%d) = %v, want %v", tc.p, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, v := range vs {
				ids[v.ID] = true
			}
			if len(vs) != c.Replicas || len(ids) != c.Replicas {
				t.Fatalf("Voters(%d) = %v: want %d distinct members", tc.p, vs, c.Replicas)
			}
			// Every node derives the same voters, whatever the order of
			// its member list.
			rev := slices.Clone(tc.members)
			slices.Reverse(rev)
			again, _ := c.Voters(tc.p, rev)
			if !slices.Equal(vs, again) {
				t.Fatalf("Voters(%d) depends on member order: %v vs %v", tc.p, vs, again)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	c := DefaultConfig()
	c.Partitions = 3000
	ms := members(30)
	l, err := c.Layout(ms)
	if err != nil {
		t.Fatal(err)
	}
	slots := 0
	for id, parts := range l.Hosted {
		if !slices.IsSorted(parts) {
			t.Fatalf("%s's partitions are not sorted", id)
		}
		for _, p := range parts {
			if !slices.Contains(l.Voters[p], id) {
				t.Fatalf("%s hosts %d but is not among its voters %v", id, p, l.Voters[p])
			}
		}
		// 3,000 partitions x 3 voters over 30 members: 300 each on average.
		if len(parts) < 240 || len(parts) > 360 {
			t.Fatalf("%s hosts %d partitions, want 300 +-20%%", id, len(parts))
		}
		slots += len(parts)
	}
	if slots != c.Partitions*c.Replicas {
		t.Fatalf("%d voter slots hosted, want %d", slots, c.Partitions*c.Replicas)
	}
	// Rendezvous: removing a member changes only the partitions it voted in.
	gone := ms[7].ID
	l2, err := c.Layout(append(slices.Clone(ms[:7]), ms[8:]...))
	if err != nil {
		t.Fatal(err)
	}
	for p := range c.Partitions {
		if !slices.Contains(l.Voters[p], gone) && !slices.Equal(l.Voters[p], l2.Voters[p]) {
			t.Fatalf("partition %d moved from %v to %v though %s was not its voter", p, l.Voters[p], l2.Voters[p], gone)
		}
	}
	if _, err := c.Layout(append(ms, ms[0])); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("a member listed twice: %v, want block.ErrInvalidArgument", err)
	}
}
