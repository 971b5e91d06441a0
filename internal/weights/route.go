package weights

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/ctxtier/ctxtier/internal/locations"
)

// Routing. Every node's S3 endpoint serves every object, but a ranged GET
// arriving at a node that does not hold the range's data blocks makes that
// node fetch them from their holders first (a peer hop, about 30% of a
// node's CPU per byte served in the fan-out benchmark). With
// Config.Route, a pull asks for each file's block locations once
// (GetObjectLocations, docs/s3.md), learns which endpoint is which member
// (the same call's Node, asked of every endpoint once), cuts every chunk's
// range on block boundaries and sends each piece to an endpoint whose node
// holds the piece's bytes. A piece whose holder is unknown, not alive, or
// has no endpoint in the configuration goes to the endpoint in use, as
// every GET did before; a routed GET that fails takes its endpoint out of
// routing for downDuration and the retry goes through the endpoint in use
// (which fails over as before). The SHA-256 checks are the same: a chunk
// is verified whole, whichever endpoints served its pieces.

// downDuration is how long an endpoint whose routed GET failed is skipped.
const downDuration = 10 * time.Second

// emptySHA256 is the hex SHA-256 of an empty body (a GET's payload hash).
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// route says which endpoint serves which bytes of one file.
type route struct {
	// pieces are contiguous, in order, covering the file.
	pieces []piece
}

// piece is a run of bytes [off, end) best read through endpoint ep (-1:
// the endpoint in use); key, when set, names the one whole data block
// (a replica: k = 1) the piece is (locations.Block.Key).
type piece struct {
	off, end int64
	ep       int
	key      string
}

// span is one ranged GET of a chunk: bytes [off, off+n) through endpoint
// ep (-1: the endpoint in use); key is set when the span is exactly one
// whole block that a co-located reader may read by descriptor (direct.go).
type span struct {
	off, n int64
	ep     int
	key    string
}

// spans cuts [off, off+n) on the route's pieces, merging neighbours that
// go to the same endpoint unless perBlock (then every block is a span of
// its own, keyed when the chunk covers it whole). A nil route gives one
// span.
func (r *route) spans(off, n int64, perBlock bool) []span {
	if r == nil || len(r.pieces) == 0 {
		return []span{{off, n, -1, ""}}
	}
	var out []span
	end := off + n
	for _, p := range r.pieces {
		if p.end <= off || p.off >= end {
			continue
		}
		lo, hi := max(p.off, off), min(p.end, end)
		if k := len(out) - 1; !perBlock && k >= 0 && out[k].ep == p.ep && out[k].off+out[k].n == lo {
			out[k].n += hi - lo
			continue
		}
		sp := span{lo, hi - lo, p.ep, ""}
		if perBlock && lo == p.off && hi == p.end {
			sp.key = p.key
		}
		out = append(out, sp)
	}
	if len(out) == 0 || out[0].off != off || out[len(out)-1].off+out[len(out)-1].n != end {
		return []span{{off, n, -1, ""}} // the route does not cover the chunk: do not trust it
	}
	return out
}

// router holds what routing learned: which endpoint is which member, and
// which endpoints failed lately.
type router struct {
	once sync.Once
	http *http.Client

	mu    sync.Mutex
	nodes map[string]int    // member ID -> endpoint index (replaced whole, never changed)
	down  map[int]time.Time // made by New: a failed GET marks its endpoint whether or not routing ever started
}

func (c *Client) routerInit() *router {
	r := c.rt
	r.once.Do(func() {
		if r.http == nil {
			r.http = &http.Client{Timeout: 30 * time.Second}
		}
	})
	return r
}

// usable reports whether a routed GET may go to endpoint ep now.
func (r *router) usable(ep int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Now().After(r.down[ep])
}

// markDown takes endpoint ep out of routing for downDuration.
func (r *router) markDown(ep int) {
	r.mu.Lock()
	r.down[ep] = time.Now().Add(downDuration)
	r.mu.Unlock()
}

// learnNodes asks every endpoint which member it is (a GetObjectLocations
// of object name, one block); endpoints that fail are left unmapped and
// are never routed to.
func (c *Client) learnNodes(ctx context.Context, name string) {
	r := c.routerInit()
	nodes := map[string]int{}
	for i := range c.mcs {
		loc, err := c.locations(ctx, i, name, 0, 1)
		if err != nil || loc.Node == "" {
			continue
		}
		if _, dup := nodes[loc.Node]; !dup {
			nodes[loc.Node] = i
		}
	}
	r.mu.Lock()
	r.nodes = nodes
	r.mu.Unlock()
}

// endpoints returns the member ID -> endpoint map learnNodes built.
func (r *router) endpoints() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes
}

// locations is one GetObjectLocations request through endpoint ep.
func (c *Client) locations(ctx context.Context, ep int, name string, offset int64, maxBlocks int) (*locations.Locations, error) {
	u := *c.mcs[ep].EndpointURL()
	u.Path = "/" + c.cfg.Namespace + "/" + name
	u.RawQuery = url.Values{"offset": {strconv.FormatInt(offset, 10)}, "max-blocks": {strconv.Itoa(maxBlocks)}}.Encode() + "&" + locations.Query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	req = signer.SignV4(*req, c.cfg.AccessKey, c.cfg.Secret, "", c.cfg.Region)
	resp, err := c.routerInit().http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("weights: locations of %s via %s: %s: %.200s", name, u.Host, resp.Status, body)
	}
	var loc locations.Locations
	if err := xml.Unmarshal(body, &loc); err != nil {
		return nil, fmt.Errorf("weights: locations of %s via %s: %w", name, u.Host, err)
	}
	return &loc, nil
}

// routeFile returns the route of a file of size bytes, or nil (no routing:
// Route off, one endpoint, a node that does not answer locations, or an
// answer that does not describe the file).
func (c *Client) routeFile(ctx context.Context, name string, size int64) *route {
	if !c.cfg.Route || len(c.mcs) < 2 || size == 0 {
		return nil
	}
	nodes := c.routerInit().endpoints()
	if len(nodes) == 0 {
		return nil
	}
	var rt route
	for off, done := int64(0), false; !done; {
		_, ep := c.client()
		loc, err := c.locations(ctx, int(ep), name, off, locations.MaxBlocks)
		if err != nil {
			return nil
		}
		if off, done, err = rt.add(loc, off, size, nodes); err != nil {
			return nil // an answer that does not describe the file: do not route by it
		}
	}
	return &rt
}

// errBadLocations: a GetObjectLocations answer that does not describe the
// object asked about (routing is then skipped, not trusted).
var errBadLocations = errors.New("weights: block locations do not describe the object")

// add appends the blocks of loc, one page of an object of size bytes
// asked from offset off, and returns where the next page starts, or done
// once the pieces tile [0, size). An answer whose blocks do not continue
// exactly at off, leave the object, or page without progress is
// errBadLocations.
func (r *route) add(loc *locations.Locations, off, size int64, nodes map[string]int) (next int64, done bool, err error) {
	if loc.Size != size || len(loc.Blocks) == 0 {
		return off, false, fmt.Errorf("%w: %d blocks of a %d-byte object, want some of %d bytes", errBadLocations, len(loc.Blocks), loc.Size, size)
	}
	for _, b := range loc.Blocks {
		if b.Offset != off || b.Length < 1 || b.Length > size-off {
			return off, false, fmt.Errorf("%w: block %d+%d at %d of %d", errBadLocations, b.Offset, b.Length, off, size)
		}
		p := piece{off, off + b.Length, holderEndpoint(nodes, b), ""}
		if b.DataShards <= 1 {
			p.key = b.Key
		}
		r.pieces = append(r.pieces, p)
		off += b.Length
	}
	switch {
	case off == size && !loc.Truncated:
		return off, true, nil
	case off < size && loc.Truncated && loc.NextOffset != nil && *loc.NextOffset == off:
		return off, false, nil
	}
	return off, false, fmt.Errorf("%w: page ends at %d of %d (truncated %v)", errBadLocations, off, size, loc.Truncated)
}

// holderEndpoint picks the endpoint of b's alive holder of a data shard
// with the lowest shard index, -1 when none has one. The answer lists
// holders in the answering node's read order (its own shard first), so
// taking the first would send every puller of a replicated block to its
// own node, and each replica would be read from its node's lower tiers
// once per node (3 lower-tier bytes per checkpoint byte with three
// copies, measured). The shard index is the block's placement rank, the
// same in every node's answer: every puller reads a block from the same
// holder, whose single-flight and DRAM promotion then serve the others,
// and the blocks' first ranks are spread over the nodes by placement.
func holderEndpoint(nodes map[string]int, b locations.Block) int {
	best, bestShard := -1, 0
	for _, h := range b.Holders {
		if h.State != "alive" || (b.DataShards > 1 && h.Shard >= b.DataShards) {
			continue
		}
		if ep, ok := nodes[h.Node]; ok && (best < 0 || h.Shard < bestShard) {
			best, bestShard = ep, h.Shard
		}
	}
	return best
}
