package weights

import (
	"encoding/xml"
	"errors"
	"fmt"
	"testing"

	"github.com/ctxtier/ctxtier/internal/locations"
	"github.com/minio/minio-go/v7"
)

// TestRouteSpans: a chunk is cut on block boundaries, neighbours going to
// the same endpoint are merged (per block: not, and a whole replicated
// block's span carries its key), the spans tile the chunk exactly, and a
// route that does not cover the chunk is not trusted.
func TestRouteSpans(t *testing.T) {
	const mb = 1 << 20
	// Blocks of 8 MiB on endpoints 0, 1, 1, -1 (unknown), 2; 36 MiB; the
	// fourth is erasure-coded (no key).
	rt := &route{pieces: []piece{{0, 8 * mb, 0, "a.0"}, {8 * mb, 16 * mb, 1, "a.1"}, {16 * mb, 24 * mb, 1, "a.2"}, {24 * mb, 32 * mb, -1, ""}, {32 * mb, 36 * mb, 2, "a.4"}}}
	for _, tt := range []struct {
		name     string
		rt       *route
		off, n   int64
		perBlock bool
		want     string
	}{
		{"no route", nil, 5, 10, false, "[{5 10 -1 }]"},
		{"inside one block", rt, 1 * mb, 2 * mb, false, fmt.Sprint([]span{{1 * mb, 2 * mb, 0, ""}})},
		{"across a boundary", rt, 0, 16 * mb, false, fmt.Sprint([]span{{0, 8 * mb, 0, ""}, {8 * mb, 8 * mb, 1, ""}})},
		{"same endpoint merged", rt, 8 * mb, 16 * mb, false, fmt.Sprint([]span{{8 * mb, 16 * mb, 1, ""}})},
		{"unaligned, four endpoints", rt, 4 * mb, 30 * mb, false, fmt.Sprint([]span{{4 * mb, 4 * mb, 0, ""}, {8 * mb, 16 * mb, 1, ""}, {24 * mb, 8 * mb, -1, ""}, {32 * mb, 2 * mb, 2, ""}})},
		{"last short chunk", rt, 32 * mb, 4 * mb, false, fmt.Sprint([]span{{32 * mb, 4 * mb, 2, ""}})},
		{"past the route's end", rt, 32 * mb, 8 * mb, false, fmt.Sprint([]span{{32 * mb, 8 * mb, -1, ""}})},
		{"per block: whole blocks keyed", rt, 8 * mb, 16 * mb, true, fmt.Sprint([]span{{8 * mb, 8 * mb, 1, "a.1"}, {16 * mb, 8 * mb, 1, "a.2"}})},
		{"per block: part of a block unkeyed", rt, 4 * mb, 12 * mb, true, fmt.Sprint([]span{{4 * mb, 4 * mb, 0, ""}, {8 * mb, 8 * mb, 1, "a.1"}})},
		{"per block: coded block unkeyed", rt, 24 * mb, 12 * mb, true, fmt.Sprint([]span{{24 * mb, 8 * mb, -1, ""}, {32 * mb, 4 * mb, 2, "a.4"}})},
		{"per block: no route", nil, 0, 8 * mb, true, fmt.Sprint([]span{{0, 8 * mb, -1, ""}})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rt.spans(tt.off, tt.n, tt.perBlock)
			if fmt.Sprint(got) != tt.want {
				t.Fatalf("spans(%d, %d, %v) = %v, want %s", tt.off, tt.n, tt.perBlock, got, tt.want)
			}
			at := tt.off
			for _, s := range got {
				if s.off != at || s.n < 1 {
					t.Fatalf("span %+v at %d: not tiling", s, at)
				}
				at += s.n
			}
			if at != tt.off+tt.n {
				t.Fatalf("spans end at %d, want %d", at, tt.off+tt.n)
			}
		})
	}
}

// TestHolderEndpoint: the first alive holder of a data shard whose node
// has an endpoint wins; dead holders, parity holders of a coded block and
// nodes without an endpoint are passed over.
func TestHolderEndpoint(t *testing.T) {
	nodes := map[string]int{"n1": 0, "n2": 1, "n3": 2}
	h := func(node string, shard int, state string) locations.Holder {
		return locations.Holder{Node: node, Shard: shard, State: state}
	}
	for _, tt := range []struct {
		name string
		b    locations.Block
		want int
	}{
		{"one copy", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n2", 0, "alive")}}, 1},
		{"first holder dead", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n3", 0, "dead"), h("n1", 1, "alive")}}, 0},
		{"replica index above k=1 is whole", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n3", 2, "alive")}}, 2},
		{"coded: parity skipped", locations.Block{DataShards: 2, Holders: []locations.Holder{h("n1", 2, "alive"), h("n3", 1, "alive")}}, 2},
		{"unknown node", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n7", 0, "alive"), h("n2", 1, "alive")}}, 1},
		{"suspect only", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n1", 0, "suspect")}}, -1},
		{"not clustered", locations.Block{DataShards: 1}, -1},
		// Every node lists its own replica first; all must pick the same.
		{"replicas, n2 answering", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n2", 1, "alive"), h("n3", 0, "alive"), h("n1", 2, "alive")}}, 2},
		{"replicas, n1 answering", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n1", 2, "alive"), h("n3", 0, "alive"), h("n2", 1, "alive")}}, 2},
		{"replicas, rank 0 dead", locations.Block{DataShards: 1, Holders: []locations.Holder{h("n1", 2, "alive"), h("n3", 0, "dead"), h("n2", 1, "alive")}}, 1},
		{"coded, data shards listed out of rank", locations.Block{DataShards: 2, Holders: []locations.Holder{h("n3", 2, "alive"), h("n2", 1, "alive"), h("n1", 0, "alive")}}, 0},
	} {
		if got := holderEndpoint(nodes, tt.b); got != tt.want {
			t.Errorf("%s: endpoint %d, want %d", tt.name, got, tt.want)
		}
	}
}

// FuzzLocations decodes arbitrary GetObjectLocations answers the way a
// pull does (XML, then route.add page by page for an object of the
// answer's asked size): an answer is either refused or yields pieces that
// tile [0, size) exactly with endpoints in range, and every chunk cut on
// them is tiled by its spans.
func FuzzLocations(f *testing.F) {
	page := func(size int64, blocks string, truncated bool, next string) string {
		return fmt.Sprintf("<ObjectLocations><Node>n1</Node><Size>%d</Size><ETag>\"e\"</ETag>%s<IsTruncated>%v</IsTruncated>%s</ObjectLocations>", size, blocks, truncated, next)
	}
	blk := func(off, n int64, node string) string {
		return fmt.Sprintf("<Block><Offset>%d</Offset><Length>%d</Length><DataShards>1</DataShards><Holder><Node>%s</Node><Shard>0</Shard><State>alive</State></Holder></Block>", off, n, node)
	}
	f.Add([]byte(page(20, blk(0, 8, "n1")+blk(8, 8, "n2")+blk(16, 4, "n3"), false, "")), int64(20), int64(16))
	f.Add([]byte(page(20, blk(0, 8, "n2"), true, "<NextOffset>8</NextOffset>")), int64(20), int64(5))
	f.Add([]byte(page(20, "", true, "<NextOffset>0</NextOffset>")), int64(20), int64(5))
	f.Add([]byte(page(20, blk(0, 9223372036854775807, "n1")+blk(-1, 21, "n2"), false, "")), int64(20), int64(7))
	f.Add([]byte("<ObjectLocations><Size>x</Size>"), int64(1), int64(1))
	nodes := map[string]int{"n1": 0, "n2": 1, "n3": 2}
	f.Fuzz(func(t *testing.T, body []byte, size, chunk int64) {
		if size < 1 || size > 1<<40 || chunk < 1 {
			return
		}
		var loc locations.Locations
		if xml.Unmarshal(body, &loc) != nil {
			return
		}
		var rt route
		// The same answer for every page: a server that repeats itself
		// must be refused, not loop.
		off, done := int64(0), false
		for pages := 0; !done; pages++ {
			var err error
			if off, done, err = rt.add(&loc, off, size, nodes); err != nil {
				if !errors.Is(err, errBadLocations) {
					t.Fatalf("error %v is not errBadLocations", err)
				}
				return
			}
			if pages > 1000 {
				t.Fatalf("answer pages without end (at %d of %d)", off, size)
			}
		}
		var at int64
		for _, p := range rt.pieces {
			if p.off != at || p.end <= p.off || p.ep < -1 || p.ep > 2 {
				t.Fatalf("piece %+v at %d", p, at)
			}
			at = p.end
		}
		if at != size {
			t.Fatalf("pieces end at %d, want %d", at, size)
		}
		for off := int64(0); off < size && off < 64*chunk; off += chunk {
			n := min(chunk, size-off)
			got := rt.spans(off, n, off%(2*chunk) == 0)
			end := off
			for _, s := range got {
				if s.off != end || s.n < 1 {
					t.Fatalf("span %+v at %d", s, end)
				}
				end += s.n
			}
			if end != off+n {
				t.Fatalf("spans of [%d, %d) end at %d", off, off+n, end)
			}
		}
	})
}

// A failed GET marks its endpoint down even when routing never started (a
// single endpoint, or Route off): that used to write to a nil map and
// panic, so a lone node answering one chunk GET with an error crashed the
// pull instead of retrying it.
func TestMarkDownWithoutRouting(t *testing.T) {
	for _, eps := range [][]string{{"127.0.0.1:1"}, {"127.0.0.1:1", "127.0.0.1:2"}} {
		cfg := DefaultConfig()
		cfg.Endpoints = eps
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !c.rt.usable(0) {
			t.Fatal("a new client's endpoint is down")
		}
		c.rt.markDown(0)
		if c.rt.usable(0) {
			t.Errorf("%d endpoints: endpoint 0 still usable after markDown", len(eps))
		}
	}
}

// TestEndpointFailure: only a failure of the endpoint itself (no S3 reply,
// or a server-side one) moves a push to the next endpoint; a refusal of
// the request would be the same through any node.
func TestEndpointFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection reset", errors.New("write tcp 127.0.0.1:1->127.0.0.1:2: write: connection reset by peer"), true},
		{"503", minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503}, true},
		{"500", minio.ErrorResponse{Code: "InternalError", StatusCode: 500}, true},
		{"access denied", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, false},
		{"no such bucket", minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, false},
		{"entity too large", minio.ErrorResponse{Code: "EntityTooLarge", StatusCode: 400}, false},
	} {
		if got := endpointFailure(tc.err); got != tc.want {
			t.Errorf("%s: endpointFailure %v, want %v", tc.name, got, tc.want)
		}
	}
}
