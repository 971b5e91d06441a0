package s3api

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// LocationsQuery is the query parameter of ctxtier's GetObjectLocations
// extension: GET /BUCKET/KEY?ctxtier-locations[&offset=N][&max-blocks=M]
// lists the data blocks of an object (of an object namespace) from byte N
// on, at most M of them (1..MaxLocationBlocks, default the maximum), and
// the members holding each one's shards, so a client can send each ranged
// GET to a node that holds its bytes (docs/s3.md). Authenticated and
// scoped like a GetObject of the same key.
const LocationsQuery = "ctxtier-locations"

// MaxLocationBlocks bounds the blocks one GetObjectLocations answer lists.
const MaxLocationBlocks = 1000

// Locations is GetObjectLocations' answer (XML, like S3's own).
type Locations struct {
	XMLName xml.Name `xml:"ObjectLocations"`
	// Node is the answering node's member ID ("" when not clustered).
	Node   string         `xml:"Node"`
	Size   int64          `xml:"Size"`
	ETag   string         `xml:"ETag"`
	Blocks []LocatedBlock `xml:"Block"`
	// Truncated: more blocks follow; ask again from NextOffset.
	Truncated  bool   `xml:"IsTruncated"`
	NextOffset *int64 `xml:"NextOffset,omitempty"`
}

// LocatedBlock is one data block: the object's bytes [Offset,
// Offset+Length), its erasure code's data shard count (1: every holder has
// the whole block) and its shard holders, in the order the answering node
// would read them (itself first when it is one). No holders: the answering
// node is not clustered and holds it.
type LocatedBlock struct {
	Offset     int64           `xml:"Offset"`
	Length     int64           `xml:"Length"`
	DataShards int             `xml:"DataShards"`
	Holders    []LocatedHolder `xml:"Holder"`
}

// LocatedHolder is a member holding shard Shard of a block; State is the
// member's state as the cluster agrees on it (alive, suspect, dead, left,
// draining).
type LocatedHolder struct {
	Node  string `xml:"Node"`
	Shard int    `xml:"Shard"`
	State string `xml:"State"`
}

func errInvalidArgument(name, value, why string) *apiError {
	e := newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "%s", why)
	e.Extra = []xmlExtra{{XMLName: xml.Name{Local: "ArgumentName"}, Value: name}, {XMLName: xml.Name{Local: "ArgumentValue"}, Value: value}}
	return e
}

// getLocations answers GetObjectLocations. A store that is not clustered
// lists every block with no holders: the answering node has them all.
func (s *Server) getLocations(q *request) error {
	key, err := s3Key(q.key)
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	from, limit := int64(0), MaxLocationBlocks
	if v := qs.Get("offset"); v != "" {
		if from, err = strconv.ParseInt(v, 10, 64); err != nil || from < 0 {
			return errInvalidArgument("offset", v, "offset must be a byte offset inside the object")
		}
	}
	if v := qs.Get("max-blocks"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxLocationBlocks {
			return errInvalidArgument("max-blocks", v, "max-blocks must be in 1.."+strconv.Itoa(MaxLocationBlocks))
		}
	}
	ctx := q.r.Context()
	o, err := s.objs.OpenObject(ctx, q.bucket, key)
	if err != nil {
		return err
	}
	if o.Size > 0 && from >= o.Size {
		return errInvalidArgument("offset", qs.Get("offset"), "offset must be a byte offset inside the object")
	}
	spans, next, err := o.Spans(from, limit)
	if err != nil {
		return err
	}
	out := Locations{Node: s.store.LocalNode(), Size: o.Size, ETag: o.ETag, Blocks: make([]LocatedBlock, 0, len(spans))}
	if next >= 0 {
		out.Truncated, out.NextOffset = true, &next
	}
	for _, sp := range spans {
		b := LocatedBlock{Offset: sp.Offset, Length: sp.Length, DataShards: 1}
		loc, err := s.store.Locate(ctx, sp.Key)
		switch {
		case errors.Is(err, block.ErrUnavailable) && out.Node == "":
			// Not clustered: this node holds every block.
		case errors.Is(err, block.ErrNotFound):
			// The version listed was replaced or deleted meanwhile.
			return errObjectChangedWhileLocated(q.key)
		case err != nil:
			return err
		default:
			b.DataShards = loc.DataShards
			for _, h := range loc.Holders {
				b.Holders = append(b.Holders, LocatedHolder{Node: h.Node, Shard: h.Shard, State: h.State})
			}
		}
		out.Blocks = append(out.Blocks, b)
	}
	return q.writeXML(out)
}

func errObjectChangedWhileLocated(key string) *apiError {
	return newErr("ServiceUnavailable", http.StatusServiceUnavailable, block.ErrUnavailable, "object %q was replaced or deleted while its blocks were located; ask again", key)
}
