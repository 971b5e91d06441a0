package s3api

import (
	"encoding/xml"
	"net/http"
	"sort"
	"strconv"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Bucket tags are the namespace's policy knobs. PutBucketTagging replaces
// the whole set, as in S3: a knob without a tag returns to the default
// namespace's value. The identity tags (model, block_tokens, hash_scheme)
// are shown by GetBucketTagging and accepted back unchanged, so a
// get-modify-put round trip works, but they cannot be changed: they define
// the keys. The TTL is set by the lifecycle configuration, not by a tag.
const (
	tagPriority     = "priority"
	tagWriteMode    = "write_mode"
	tagDataShards   = "data_shards"
	tagParityShards = "parity_shards"
	tagMaxBlockSize = "max_block_size"
	tagModel        = "model"
	tagBlockTokens  = "block_tokens"
	tagHashScheme   = "hash_scheme"
)

type xmlTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Tags    []xmlTag `xml:"TagSet>Tag"`
}

func invalidTag(format string, a ...any) error {
	return newErr("InvalidTag", http.StatusBadRequest, block.ErrInvalidArgument, format, a...)
}

func nsTags(ns block.Namespace) []xmlTag {
	tags := []xmlTag{
		{tagPriority, strconv.Itoa(int(ns.Priority))},
		{tagWriteMode, string(ns.WriteMode)},
		{tagDataShards, strconv.Itoa(ns.DataShards)},
		{tagParityShards, strconv.Itoa(ns.ParityShards)},
		{tagMaxBlockSize, block.FormatSize(ns.MaxBlockSize)},
		{tagBlockTokens, strconv.Itoa(ns.BlockTokens)},
		{tagHashScheme, string(ns.HashScheme)},
	}
	if ns.Model != "" {
		tags = append(tags, xmlTag{tagModel, ns.Model})
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i].Key < tags[j].Key })
	return tags
}

// applyTags returns cur with its knobs reset to the defaults and then set
// from tags.
func applyTags(cur block.Namespace, tags []xmlTag) (block.Namespace, error) {
	def := block.DefaultNamespaceConfig()
	ns := cur
	ns.Priority, ns.WriteMode, ns.DataShards, ns.ParityShards, ns.MaxBlockSize =
		def.Priority, def.WriteMode, def.DataShards, def.ParityShards, def.MaxBlockSize
	seen := map[string]bool{}
	atoi := func(k, v string, lo, hi int) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, invalidTag("tag %s=%q: want an integer in %d..%d", k, v, lo, hi)
		}
		return n, nil
	}
	for _, t := range tags {
		if seen[t.Key] {
			return cur, invalidTag("tag %q appears twice", t.Key)
		}
		seen[t.Key] = true
		var err error
		var n int
		switch t.Key {
		case tagPriority:
			n, err = atoi(t.Key, t.Value, 0, block.MaxPriority)
			ns.Priority = uint8(n)
		case tagWriteMode:
			ns.WriteMode = block.WriteMode(t.Value)
		case tagDataShards:
			ns.DataShards, err = atoi(t.Key, t.Value, 1, 32)
		case tagParityShards:
			ns.ParityShards, err = atoi(t.Key, t.Value, 0, 31)
		case tagMaxBlockSize:
			ns.MaxBlockSize, err = block.ParseSize(t.Value)
		case tagModel:
			if t.Value != cur.Model {
				err = invalidTag("tag model cannot change (it defines the keys)")
			}
		case tagBlockTokens:
			if t.Value != strconv.Itoa(cur.BlockTokens) {
				err = invalidTag("tag block_tokens cannot change (it defines the keys)")
			}
		case tagHashScheme:
			if t.Value != string(cur.HashScheme) {
				err = invalidTag("tag hash_scheme cannot change (it defines the keys)")
			}
		default:
			err = invalidTag("unknown tag %q; known: priority, write_mode, data_shards, parity_shards, max_block_size (model, block_tokens, hash_scheme read-only)", t.Key)
		}
		if err != nil {
			return cur, err
		}
	}
	if err := ns.Validate(); err != nil {
		return cur, invalidTag("%v", err)
	}
	return ns, nil
}

func (s *Server) getTagging(q *request) error {
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	return q.writeXML(tagging{Xmlns: s3NS, Tags: nsTags(ns)})
}

func (s *Server) putTagging(q *request) error {
	body, err := s.readBody(q, s.cfg.MaxXMLBody, nil, false)
	if err != nil {
		return err
	}
	var t tagging
	if err := xml.Unmarshal(body, &t); err != nil {
		return errMalformedXML(err)
	}
	cur, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	ns, err := applyTags(cur, t.Tags)
	if err != nil {
		return err
	}
	if err := s.store.UpdateNamespace(q.r.Context(), ns); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusNoContent)
}

func (s *Server) deleteTagging(q *request) error {
	cur, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	ns, err := applyTags(cur, nil)
	if err != nil {
		return err
	}
	if err := s.store.UpdateNamespace(q.r.Context(), ns); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusNoContent)
}
