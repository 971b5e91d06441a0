package placement

import (
	"encoding/json"
	"flag"
	"fmt"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/golden"
)

// Regenerate with: go test ./ctxstore/placement -run TestSharedVectors -update
var update = flag.Bool("update", false, "rewrite testdata/owners.json from this package")

const vectorsFile = "testdata/owners.json"

// vectorMember is a member as GET /v1/cluster/status lists it.
type vectorMember struct {
	ID       string `json:"id"`
	Zone     string `json:"zone,omitempty"`
	Capacity int64  `json:"capacity"`
}

// vectorKey is one key, its hash, and the members ranked for it.
type vectorKey struct {
	Namespace string   `json:"namespace"`
	Hash      string   `json:"hash"` // 16 hex digits
	Part      *uint16  `json:"part,omitempty"`
	KeyHash   string   `json:"key_hash"`
	Rank      []string `json:"rank"`
	Pick2     []string `json:"pick2"`
}

type vectorFile struct {
	Comment string         `json:"comment"`
	Members []vectorMember `json:"members"`
	Keys    []vectorKey    `json:"keys"`
}

// TestSharedVectors: testdata/owners.json holds what this package computes
// for a member list and 48 keys (KeyHash, the full ranking, a two-shard
// Pick with zones); python/tests/test_placement.py checks the Python
// client's owner ranking (ctxtier.placement) against the same file.
func TestSharedVectors(t *testing.T) {
	members := []vectorMember{
		{ID: "n1", Zone: "a", Capacity: 4 << 30}, {ID: "n2", Zone: "a", Capacity: 1 << 30},
		{ID: "n3", Zone: "b", Capacity: 2 << 30}, {ID: "node-4", Zone: "b", Capacity: 3 << 29},
		{ID: "n5", Capacity: 0},
	}
	var nodes []Node
	for _, m := range members {
		nodes = append(nodes, Node{ID: m.ID, Zone: m.Zone, Weight: CapacityWeight(m.Capacity)})
	}
	f := vectorFile{
		Comment: "Rendezvous placement of ctxstore/placement (KeyHash, Rank, Pick of 2 with zones) for the members below; " +
			"python/tests/test_placement.py checks ctxtier.placement against it. Regenerate: go test ./ctxstore/placement -run TestSharedVectors -update",
		Members: members,
	}
	for i := range 48 {
		ns := []string{"default", "kv/llama-3-8b", "ünïcode"}[i%3]
		k := block.NewKey(ns, uint64(i)*0x9E3779B97F4A7C15+uint64(i))
		var part *uint16
		if i%4 == 3 {
			p := uint16(i * 37)
			k, part = k.WithPart(p), &p
		}
		var rank, pick []string
		for _, n := range Rank(k, nodes) {
			rank = append(rank, n.ID)
		}
		picked, err := Pick(k, nodes, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range picked {
			pick = append(pick, n.ID)
		}
		f.Keys = append(f.Keys, vectorKey{Namespace: ns, Hash: fmt.Sprintf("%016x", k.Hash), Part: part,
			KeyHash: fmt.Sprintf("%016x", KeyHash(k)), Rank: rank, Pick2: pick})
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	golden.Check(t, vectorsFile, out, *update, "go test ./ctxstore/placement -run TestSharedVectors -update")
}
