package wire

import (
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// DeleteIfItemSize is the encoded size of one DELETE_IF item: a 12-byte key
// and the u32 CRC-32C of the bytes the sender means to delete.
const DeleteIfItemSize = KeySize + 4

// AppendDeleteIfItem appends one DELETE_IF item.
func AppendDeleteIfItem(b []byte, k block.Key, sum uint32) []byte {
	return le.AppendUint32(AppendKey(b, k), sum)
}

// decodeDeleteIf decodes DELETE_IF's items: count (key, checksum) pairs.
// A malformed key is that item's error (KeyErrs), as for DELETE.
func (req *Request) decodeDeleteIf(b []byte) error {
	if uint64(len(b)) != uint64(req.Count)*DeleteIfItemSize {
		return fmt.Errorf("%w: %d bytes for %d delete-if items of %d bytes", errcode.ErrMalformedFrame, len(b), req.Count, DeleteIfItemSize)
	}
	req.Keys = make([]block.Key, req.Count)
	req.Sums = make([]uint32, req.Count)
	var errs []error
	for i := range req.Keys {
		item := b[i*DeleteIfItemSize:]
		k, err := decodeKey(req.Namespace, item)
		req.Keys[i], req.Sums[i] = k, le.Uint32(item[KeySize:])
		if err != nil {
			if errs == nil {
				errs = make([]error, req.Count)
			}
			errs[i] = err
		}
	}
	req.KeyErrs = errs
	return nil
}
