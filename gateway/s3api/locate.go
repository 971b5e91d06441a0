package s3api

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/locations"
)

// The GetObjectLocations wire types live in internal/locations, which the
// weights puller (a client, below the gateway) shares.
const (
	LocationsQuery    = locations.Query
	MaxLocationBlocks = locations.MaxBlocks
)

type (
	Locations     = locations.Locations
	LocatedBlock  = locations.Block
	LocatedHolder = locations.Holder
)

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
	o, err := s.objs.OpenObject(ctx, q.bucket, key, readLevel)
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
		b := LocatedBlock{Offset: sp.Offset, Length: sp.Length, DataShards: 1, Key: sp.Key.ObjectName()}
		loc, err := s.store.Locate(ctx, sp.Key, ctxstore.ReadOptions{Level: readLevel})
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
				b.Holders = append(b.Holders, LocatedHolder{Node: h.Node, Shard: h.Shard, State: h.State, InMemory: h.InMemory})
			}
		}
		out.Blocks = append(out.Blocks, b)
	}
	return q.writeXML(out)
}

func errObjectChangedWhileLocated(key string) *apiError {
	return newErr("ServiceUnavailable", http.StatusServiceUnavailable, block.ErrUnavailable, "object %q was replaced or deleted while its blocks were located; ask again", key)
}
