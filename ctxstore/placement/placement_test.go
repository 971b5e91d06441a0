package placement

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func nodes(n int, zones int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: fmt.Sprintf("node-%d", i), Zone: fmt.Sprintf("z%d", i%max(zones, 1))}
	}
	return out
}

func TestPickDeterministicAndDistinct(t *testing.T) {
	ns := nodes(5, 1)
	k := block.NewKey("default", 12345)
	a, err := Pick(k, ns, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Same answer regardless of member order.
	rev := append([]Node(nil), ns...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	b, _ := Pick(k, rev, 3)
	seen := map[string]bool{}
	for i := range a {
		if a[i].ID != b[i].ID {
			t.Fatalf("order-dependent placement: %v vs %v", a, b)
		}
		if seen[a[i].ID] {
			t.Fatalf("duplicate node in %v", a)
		}
		seen[a[i].ID] = true
	}
	if _, err := Pick(k, ns, 6); err == nil {
		t.Fatal("picking more nodes than exist must fail")
	}
}

func TestPickSpreadsZones(t *testing.T) {
	ns := nodes(6, 3)
	for h := range 200 {
		got, err := Pick(block.NewKey("default", uint64(h)), ns, 3)
		if err != nil {
			t.Fatal(err)
		}
		zones := map[string]bool{}
		for _, n := range got {
			zones[n.Zone] = true
		}
		if len(zones) != 3 {
			t.Fatalf("key %d: shards not spread across 3 zones: %v", h, got)
		}
	}
}

func TestMinimalMovementAndBalance(t *testing.T) {
	ns := nodes(10, 1)
	const keys = 20000
	counts := map[string]int{}
	moved := 0
	for h := range keys {
		k := block.NewKey("default", uint64(h)*0x9e3779b97f4a7c15)
		before, _ := Pick(k, ns, 1)
		counts[before[0].ID]++
		after, _ := Pick(k, ns[:9], 1) // node-9 removed
		if before[0].ID != after[0].ID {
			moved++
			if before[0].ID != "node-9" {
				t.Fatalf("key moved off a surviving node %s", before[0].ID)
			}
		}
	}
	// Only node-9's keys (about a tenth) move.
	if moved != counts["node-9"] {
		t.Fatalf("moved %d, node-9 held %d", moved, counts["node-9"])
	}
	for id, c := range counts {
		if math.Abs(float64(c)-keys/10) > keys/10*0.1 {
			t.Errorf("%s holds %d keys, want about %d", id, c, keys/10)
		}
	}
}

func TestWeights(t *testing.T) {
	ns := []Node{{ID: "small", Weight: 1}, {ID: "big", Weight: 3}}
	big := 0
	const keys = 20000
	for h := range keys {
		got, _ := Pick(block.NewKey("default", uint64(h)), ns, 1)
		if got[0].ID == "big" {
			big++
		}
	}
	if f := float64(big) / keys; math.Abs(f-0.75) > 0.02 {
		t.Fatalf("weight 3 of 4 got share %.3f", f)
	}
}

// TestPickUnchangedAcrossVersions pins Pick's answers: every node of a
// cluster computes placement itself, so a build that placed differently
// would disagree with its peers during a rolling upgrade. The strings were
// produced by the implementation before Pick stopped allocating per call
// (sort.Slice, a zone map): each key's four picks as node digits.
func TestPickUnchangedAcrossVersions(t *testing.T) {
	cases := []struct {
		zones int
		want  string
	}{
		{1, "2150142012302046624136102631410540232631354110234253206123144216362443024621201326513204432023102630621521432605251026153410301223043064342106314162514220343261"},
		{2, "2150142012302104612436102361410543022361345110234523210623144126362443024162210325613204432023102360612521432560251021653410301223043064342103614162541223043261"},
		{3, "2105120412302046624131262613405140232613354110234235201623144261324643204621201326153240432023102613621521342610210526153421312023403420342101564621510420433216"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d zones", tc.zones), func(t *testing.T) {
			ns := nodes(7, tc.zones)
			ns[2].Weight = 3
			ns[5].Weight = 0.5
			var got strings.Builder
			for h := range 40 {
				picked, err := Pick(block.NewKey("ns-golden", uint64(h)*0x9e3779b97f4a7c15), ns, 4)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range picked {
					got.WriteString(strings.TrimPrefix(n.ID, "node-"))
				}
			}
			if got.String() != tc.want {
				t.Fatalf("placement changed:\n got %s\nwant %s", got.String(), tc.want)
			}
		})
	}
}

// BenchmarkPick is one block's placement among three members in three
// zones, as a put of a one-copy block and a rebalance scan's entry do.
func BenchmarkPick(b *testing.B) {
	ns := nodes(3, 3)
	b.ReportAllocs()
	for i := range b.N {
		if _, err := Pick(block.NewKey("default", uint64(i)), ns, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPickReusing: with one Scratch across calls of every size, the answer
// equals Pick's, and once the scratch has grown no call allocates.
func TestPickReusing(t *testing.T) {
	var s Scratch
	for _, c := range []struct{ nodes, zones, n int }{{3, 3, 1}, {5, 2, 3}, {12, 4, 6}, {3, 1, 3}, {20, 5, 1}, {4, 4, 0}} {
		ns := nodes(c.nodes, c.zones)
		ns[0].Weight = 4
		for i := range 500 {
			k := block.NewKey("default", uint64(i)*2654435761)
			want, err := Pick(k, ns, c.n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := PickReusing(k, ns, c.n, &s)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%+v key %d: PickReusing %v, Pick %v", c, i, got, want)
			}
		}
	}
	if _, err := PickReusing(block.NewKey("default", 1), nodes(2, 2), 3, &s); err == nil {
		t.Fatal("3 shards on 2 nodes: no error")
	}
	ns := nodes(12, 4)
	i := uint64(0)
	if a := testing.AllocsPerRun(100, func() {
		i++
		if _, err := PickReusing(block.NewKey("default", i), ns, 6, &s); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%.1f allocations per PickReusing", a)
	}
}
