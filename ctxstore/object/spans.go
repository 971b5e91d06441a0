package object

import (
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Span is one data block of an object: the block's key and the bytes
// [Offset, Offset+Length) of the object it holds.
type Span struct {
	Key    block.Key
	Offset int64
	Length int64
}

// Spans lists, in order, the object's data blocks that end after byte
// from, at most limit of them (limit < 1: all). next is the offset to ask
// for the following ones, or -1 when the list reaches the object's end.
// A from outside [0, Size) is block.ErrInvalidArgument (from 0 of an empty
// object lists nothing).
func (o *Object) Spans(from int64, limit int) (spans []Span, next int64, err error) {
	if from < 0 || (from >= o.Size && !(from == 0 && o.Size == 0)) {
		return nil, -1, fmt.Errorf("%w: offset %d outside the object's %d bytes", block.ErrInvalidArgument, from, o.Size)
	}
	base := int64(0)
	for _, g := range o.m.Segments {
		if base+g.Size <= from {
			base += g.Size
			continue
		}
		for i := int((max(from, base) - base) / g.Chunk); i < g.Blocks(); i++ {
			if limit > 0 && len(spans) == limit {
				return spans, base + int64(i)*g.Chunk, nil
			}
			bs := base + int64(i)*g.Chunk
			spans = append(spans, Span{Key: dataKey(o.ns, g.Version, i), Offset: bs, Length: min(g.Chunk, g.Size-int64(i)*g.Chunk)})
		}
		base += g.Size
	}
	return spans, -1, nil
}
