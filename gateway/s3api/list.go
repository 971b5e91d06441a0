package s3api

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

type xmlObject struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

type xmlPrefix struct {
	Prefix string `xml:"Prefix"`
}

type listV2Result struct {
	XMLName               xml.Name    `xml:"ListBucketResult"`
	Xmlns                 string      `xml:"xmlns,attr"`
	Name                  string      `xml:"Name"`
	Prefix                string      `xml:"Prefix"`
	StartAfter            string      `xml:"StartAfter,omitempty"`
	ContinuationToken     string      `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string      `xml:"NextContinuationToken,omitempty"`
	KeyCount              int         `xml:"KeyCount"`
	MaxKeys               int         `xml:"MaxKeys"`
	Delimiter             string      `xml:"Delimiter,omitempty"`
	EncodingType          string      `xml:"EncodingType,omitempty"`
	IsTruncated           bool        `xml:"IsTruncated"`
	Contents              []xmlObject `xml:"Contents"`
	CommonPrefixes        []xmlPrefix `xml:"CommonPrefixes"`
}

type listV1Result struct {
	XMLName        xml.Name    `xml:"ListBucketResult"`
	Xmlns          string      `xml:"xmlns,attr"`
	Name           string      `xml:"Name"`
	Prefix         string      `xml:"Prefix"`
	Marker         string      `xml:"Marker"`
	NextMarker     string      `xml:"NextMarker,omitempty"`
	MaxKeys        int         `xml:"MaxKeys"`
	Delimiter      string      `xml:"Delimiter,omitempty"`
	EncodingType   string      `xml:"EncodingType,omitempty"`
	IsTruncated    bool        `xml:"IsTruncated"`
	Contents       []xmlObject `xml:"Contents"`
	CommonPrefixes []xmlPrefix `xml:"CommonPrefixes"`
}

// listing is one page of a bucket listing.
type listing struct {
	objects   []xmlObject
	prefixes  []xmlPrefix
	truncated bool
	next      string // the cursor after the last returned entry
}

// pastPrefix sorts after every object name that starts with p: names use
// only [0-9a-f.], all below 0x7f.
func pastPrefix(p string) string { return p + "\x7f" }

// list returns up to maxKeys objects and common prefixes after cursor,
// rolling keys that contain delim (after prefix) into common prefixes.
func (s *Server) list(q *request, prefix, delim, cursor string, maxKeys int) (listing, error) {
	var out listing
	if maxKeys == 0 {
		return out, nil
	}
	if delim != "" && strings.HasPrefix(cursor, prefix) && strings.HasSuffix(cursor[len(prefix):], delim) {
		// The cursor is a common prefix returned earlier: skip all it rolls up.
		cursor = pastPrefix(cursor)
	}
	lastPrefix := ""
	for {
		want := maxKeys - len(out.objects) - len(out.prefixes) + 1
		infos, err := s.store.List(q.r.Context(), q.bucket, prefix, cursor, want, ctxstore.ReadOptions{Level: readLevel})
		if err != nil {
			return out, err
		}
		for _, info := range infos {
			name := info.Key.ObjectName()
			if delim != "" {
				if i := strings.Index(name[len(prefix):], delim); i >= 0 {
					cp := name[:len(prefix)+i+len(delim)]
					if cp == lastPrefix {
						continue
					}
					if len(out.objects)+len(out.prefixes) == maxKeys {
						out.truncated = true
						return out, nil
					}
					out.prefixes = append(out.prefixes, xmlPrefix{Prefix: cp})
					lastPrefix, out.next, cursor = cp, cp, pastPrefix(cp)
					continue
				}
			}
			if len(out.objects)+len(out.prefixes) == maxKeys {
				out.truncated = true
				return out, nil
			}
			out.objects = append(out.objects, xmlObject{
				Key: name, LastModified: info.Created.UTC().Format(time.RFC3339Nano),
				ETag: etag(info.Sum), Size: info.Size, StorageClass: "STANDARD",
			})
			out.next, cursor = name, name
		}
		if len(infos) < want {
			return out, nil
		}
	}
}

// tokenVersion starts every continuation token, so a token from another
// server (or a corrupted one) is refused rather than misread.
const tokenVersion = 1

// encodeToken makes an opaque continuation token for a listing cursor: a
// version byte, the cursor's CRC-32C and the cursor, base64url.
func encodeToken(cursor string) string {
	b := make([]byte, 0, 5+len(cursor))
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint32(b, block.Checksum([]byte(cursor)))
	b = append(b, cursor...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken returns the cursor encodeToken wrapped, or 400 InvalidArgument.
func decodeToken(token string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < 5 || b[0] != tokenVersion || binary.BigEndian.Uint32(b[1:5]) != block.Checksum(b[5:]) {
		return "", newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "the continuation token provided is incorrect")
	}
	return string(b[5:]), nil
}

func (s *Server) maxKeys(q *request) (int, error) {
	v := q.r.URL.Query().Get("max-keys")
	if v == "" {
		return s.cfg.MaxKeys, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "max-keys %q must be a non-negative integer", v)
	}
	return min(n, s.cfg.MaxKeys), nil
}

func encodingType(q *request) (string, func(string) string, error) {
	switch et := q.r.URL.Query().Get("encoding-type"); et {
	case "":
		return "", func(s string) string { return s }, nil
	case "url":
		return et, func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }, nil
	default:
		return "", nil, newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "invalid encoding-type %q", et)
	}
}

func (s *Server) listObjectsV2(q *request) error {
	qs := q.r.URL.Query()
	n, err := s.maxKeys(q)
	if err != nil {
		return err
	}
	et, enc, err := encodingType(q)
	if err != nil {
		return err
	}
	prefix, delim, startAfter := qs.Get("prefix"), qs.Get("delimiter"), qs.Get("start-after")
	token := qs.Get("continuation-token")
	cursor := startAfter
	if qs.Has("continuation-token") {
		c, err := decodeToken(token)
		if err != nil {
			return err
		}
		cursor = max(cursor, c)
	}
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	list := s.list
	if ns.IsObject() {
		list = s.listObjectsNS
	}
	l, err := list(q, prefix, delim, cursor, n)
	if err != nil {
		return err
	}
	res := listV2Result{Xmlns: s3NS, Name: q.bucket, Prefix: enc(prefix), StartAfter: enc(startAfter), ContinuationToken: token,
		KeyCount: len(l.objects) + len(l.prefixes), MaxKeys: n, Delimiter: enc(delim), EncodingType: et, IsTruncated: l.truncated}
	if l.truncated {
		res.NextContinuationToken = encodeToken(l.next)
	}
	res.Contents, res.CommonPrefixes = encodeEntries(l, enc)
	return q.writeXML(res)
}

func (s *Server) listObjectsV1(q *request) error {
	qs := q.r.URL.Query()
	n, err := s.maxKeys(q)
	if err != nil {
		return err
	}
	et, enc, err := encodingType(q)
	if err != nil {
		return err
	}
	prefix, delim, marker := qs.Get("prefix"), qs.Get("delimiter"), qs.Get("marker")
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	list := s.list
	if ns.IsObject() {
		list = s.listObjectsNS
	}
	l, err := list(q, prefix, delim, marker, n)
	if err != nil {
		return err
	}
	res := listV1Result{Xmlns: s3NS, Name: q.bucket, Prefix: enc(prefix), Marker: enc(marker), MaxKeys: n,
		Delimiter: enc(delim), EncodingType: et, IsTruncated: l.truncated}
	if l.truncated && delim != "" {
		res.NextMarker = enc(l.next)
	}
	res.Contents, res.CommonPrefixes = encodeEntries(l, enc)
	return q.writeXML(res)
}

func encodeEntries(l listing, enc func(string) string) ([]xmlObject, []xmlPrefix) {
	for i := range l.objects {
		l.objects[i].Key = enc(l.objects[i].Key)
	}
	for i := range l.prefixes {
		l.prefixes[i].Prefix = enc(l.prefixes[i].Prefix)
	}
	return l.objects, l.prefixes
}
