package weights

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/internal/locations"
)

func TestJoinPlan(t *testing.T) {
	T, F := true, false
	seq := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	}
	for _, tc := range []struct {
		name string
		todo [][]int
		hot  [][]bool
		from position
		want []segment
	}{
		{"nothing to fetch", [][]int{nil, {}}, nil, position{}, nil},
		{"no hot chunk: in order", [][]int{seq(3), seq(2)}, nil, position{},
			[]segment{{0, []int{0, 1, 2}}, {1, []int{0, 1}}}},
		{"hot entries shorter than todo are cold", [][]int{seq(3), seq(2)}, [][]bool{{F}}, position{},
			[]segment{{0, []int{0, 1, 2}}, {1, []int{0, 1}}}},
		{"a run inside a file: start in its middle, the head last", [][]int{seq(10)},
			[][]bool{{F, F, F, F, T, T, T, T, F, F}}, position{},
			[]segment{{0, []int{6, 7, 8, 9}}, {0, []int{0, 1, 2, 3, 4, 5}}}},
		{"a run across files", [][]int{seq(3), seq(3)},
			[][]bool{{F, F, T}, {T, T, F}}, position{},
			[]segment{{1, []int{0, 1, 2}}, {0, []int{0, 1, 2}}}},
		{"the longest run wins over an earlier one", [][]int{seq(8)},
			[][]bool{{F, T, F, T, T, T, F, F}}, position{},
			[]segment{{0, []int{4, 5, 6, 7}}, {0, []int{0, 1, 2, 3}}}},
		{"at a hot chunk: go on from it", [][]int{seq(4)}, [][]bool{{T, F, T, T}}, position{},
			[]segment{{0, []int{0, 1, 2, 3}}}},
		{"only the chunks still needed count", [][]int{{1, 3, 5}},
			[][]bool{{F, F, F, T, F, T}}, position{},
			[]segment{{0, []int{5}}, {0, []int{1, 3}}}},
		{"a file with nothing left is skipped", [][]int{seq(2), nil, seq(2)},
			[][]bool{nil, nil, {F, T}}, position{},
			[]segment{{2, []int{1}}, {0, []int{0, 1}}, {2, []int{0}}}},
		{"from a position, no hot chunk: on from there, then the ones before", [][]int{seq(3), seq(3)}, nil, position{1, 1},
			[]segment{{1, []int{1, 2}}, {0, []int{0, 1, 2}}, {1, []int{0}}}},
		{"from a position past the last chunk of a file", [][]int{{0, 1}, {0, 1}}, nil, position{0, 2},
			[]segment{{1, []int{0, 1}}, {0, []int{0, 1}}}},
		{"fallen behind: jump into the run ahead", [][]int{{4, 5, 6, 7, 8, 9, 10, 11}},
			[][]bool{{F, F, F, F, F, F, T, T, T, T, F, F}}, position{0, 4},
			[]segment{{0, []int{8, 9, 10, 11}}, {0, []int{4, 5, 6, 7}}}},
		{"in the stream: go on, do not jump", [][]int{{4, 5, 6, 7, 8, 9}},
			[][]bool{{F, F, F, F, T, T, T, T, T, F}}, position{0, 4},
			[]segment{{0, []int{4, 5, 6, 7, 8, 9}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := joinPlan(tc.todo, tc.hot, tc.from)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("joinPlan = %v, want %v", got, tc.want)
			}
			// Every chunk needed appears exactly once.
			seen := map[[2]int]int{}
			for _, s := range got {
				for _, c := range s.chunks {
					seen[[2]int{s.file, c}]++
				}
			}
			n := 0
			for f, cs := range tc.todo {
				for _, c := range cs {
					n++
					if seen[[2]int{f, c}] != 1 {
						t.Fatalf("chunk %d of file %d planned %d times", c, f, seen[[2]int{f, c}])
					}
				}
			}
			if len(seen) != n {
				t.Fatalf("planned %d chunks, %d needed", len(seen), n)
			}
		})
	}
}

// TestHotChunks: three fake nodes answer GetObjectLocations, each marking
// only its own shards InMemory. A chunk is hot when every block it overlaps
// is in memory where a routed read takes it from: the routed holder of a
// one-copy block, every data-shard holder of a coded one (parity does not
// count). A node that answers as another member, or not at all, leaves
// every chunk cold.
func TestHotChunks(t *testing.T) {
	const mib = 1 << 20
	type holder struct {
		node  string
		shard int
		mem   bool
	}
	type blockSpec struct {
		k       int
		holders []holder
	}
	blocks := []blockSpec{
		{1, []holder{{"n1", 0, true}}},                                    // chunk 0
		{1, []holder{{"n2", 0, true}}},                                    // chunk 0
		{1, []holder{{"n3", 0, false}}},                                   // chunk 1
		{1, []holder{{"n1", 0, true}}},                                    // chunk 1
		{2, []holder{{"n1", 0, true}, {"n2", 1, true}, {"n3", 2, false}}}, // chunk 2: parity cold, still hot
		{2, []holder{{"n2", 0, true}, {"n3", 1, true}, {"n1", 2, false}}}, // chunk 2
		{1, []holder{{"n1", 0, false}, {"n2", 1, true}}},                  // chunk 3: the routed copy (rank 0) is cold
		{1, []holder{{"n3", 0, true}}},                                    // chunk 3
		{2, []holder{{"n1", 0, true}, {"n2", 1, false}, {"n3", 2, true}}}, // chunk 4 (last, short): a data shard cold
	}
	size := int64(len(blocks)-1)*8*mib + 4*mib
	var wrongNode string
	serve := func(me string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := r.URL.Query()[locations.Query]; !ok {
				http.Error(w, "not a locations request", http.StatusBadRequest)
				return
			}
			name := me
			if me == wrongNode {
				name = "n9"
			}
			out := locations.Locations{Node: name, Size: size}
			for i, b := range blocks {
				lb := locations.Block{Offset: int64(i) * 8 * mib, Length: min(8*mib, size-int64(i)*8*mib), DataShards: b.k}
				for _, h := range b.holders {
					lb.Holders = append(lb.Holders, locations.Holder{Node: h.node, Shard: h.shard, State: "alive", InMemory: h.mem && h.node == me})
				}
				out.Blocks = append(out.Blocks, lb)
			}
			xml.NewEncoder(w).Encode(out)
		}))
	}
	var eps []string
	var srvs []*httptest.Server
	nodes := map[string]int{}
	for i, n := range []string{"n1", "n2", "n3"} {
		srv := serve(n)
		t.Cleanup(srv.Close)
		srvs = append(srvs, srv)
		eps = append(eps, strings.TrimPrefix(srv.URL, "http://"))
		nodes[n] = i
	}
	cfg := DefaultConfig()
	cfg.Endpoints, cfg.AccessKey, cfg.Secret = eps, "k", "s"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := c.hotChunks(t.Context(), "m/f", size, 16*mib, nodes)
	if want := []bool{true, false, true, false, false}; !reflect.DeepEqual(got, want) {
		t.Fatalf("hot chunks %v, want %v", got, want)
	}
	wrongNode = "n2"
	if got := c.hotChunks(t.Context(), "m/f", size, 16*mib, nodes); got != nil {
		t.Fatalf("an endpoint answering as another member: %v, want nil", got)
	}
	wrongNode = ""
	srvs[2].Close()
	if got := c.hotChunks(t.Context(), "m/f", size, 16*mib, nodes); got != nil {
		t.Fatalf("a node that does not answer: %v, want nil", got)
	}
}
