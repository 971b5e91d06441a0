package s3api

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/object"
)

// Multipart upload handlers (object namespaces; ctxstore/object keeps the
// uploads and parts).

type initiateResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

func (s *Server) createUpload(q *request) error {
	key, err := s3Key(q.key)
	if err != nil {
		return err
	}
	hdrs, err := objectHeaders(q.r.Header)
	if err != nil {
		return err
	}
	hints, err := objectHints(q.r.Header)
	if err != nil {
		return err
	}
	u, err := s.objs.CreateUpload(q.r.Context(), q.bucket, key, hdrs, hints)
	if err != nil {
		return err
	}
	return q.writeXML(initiateResult{Xmlns: s3NS, Bucket: q.bucket, Key: q.key, UploadID: u.ID})
}

// partNumber parses the partNumber parameter (1..10000).
func partNumber(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > object.MaxParts {
		return 0, newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "Part number must be an integer between 1 and %d, inclusive.", object.MaxParts)
	}
	return n, nil
}

// upload checks that the request's uploadId names an upload of its key.
func (s *Server) upload(q *request) (object.Upload, error) {
	u, err := s.objs.GetUpload(q.r.Context(), q.bucket, q.r.URL.Query().Get("uploadId"), readLevel)
	if err != nil {
		return u, err
	}
	if u.Key != q.key {
		return u, fmt.Errorf("%w: upload %s is of another key", object.ErrNoSuchUpload, u.ID)
	}
	return u, nil
}

func (s *Server) uploadPart(q *request) error {
	n, err := partNumber(q.r.URL.Query().Get("partNumber"))
	if err != nil {
		return err
	}
	if _, err := s.upload(q); err != nil {
		return err
	}
	body, err := s.streamBody(q, s.cfg.MaxPutSize)
	if err != nil {
		return err
	}
	m, err := s.objs.UploadPart(q.r.Context(), q.bucket, q.r.URL.Query().Get("uploadId"), n, body, s.cfg.MaxPutSize)
	if err != nil {
		return err
	}
	q.w.Header().Set("Etag", m.ETag)
	body.echoChecksums(q.w.Header())
	return q.writeEmpty(http.StatusOK)
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
}

func (s *Server) uploadPartCopy(q *request) error {
	n, err := partNumber(q.r.URL.Query().Get("partNumber"))
	if err != nil {
		return err
	}
	if _, err := s.upload(q); err != nil {
		return err
	}
	o, _, _, err := s.copySource(q)
	if err != nil {
		return err
	}
	first, length := int64(0), o.Size
	if rh := q.r.Header.Get("X-Amz-Copy-Source-Range"); rh != "" {
		a, b, ok, err := parseRange(rh, o.Size)
		if err != nil || !ok || b >= o.Size {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
		}
		first, length = a, b-a+1
	}
	ctx, cancel := context.WithCancel(q.r.Context())
	defer cancel()
	body := pipeRange(ctx, o, first, length)
	defer body.Close()
	m, err := s.objs.UploadPart(ctx, q.bucket, q.r.URL.Query().Get("uploadId"), n, body, s.cfg.MaxPutSize)
	if err != nil {
		return err
	}
	return q.writeXML(copyPartResult{Xmlns: s3NS, LastModified: m.Modified.Format(time.RFC3339Nano), ETag: m.ETag})
}

type completeRequest struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
	} `xml:"Part"`
}

type completeResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

func (s *Server) completeUpload(q *request) error {
	ifAbsent, _, err := writeConditions(q)
	if err != nil {
		return err
	}
	// An upload completed already (a retry, or completions at once) is
	// answered as its completion was, while ctxd remembers it.
	var done *object.Meta
	if _, err := s.upload(q); errors.Is(err, object.ErrNoSuchUpload) {
		key, m, cerr := s.objs.CompletedUpload(q.r.Context(), q.bucket, q.r.URL.Query().Get("uploadId"), readLevel)
		if cerr != nil || key != q.key {
			return err
		}
		done = &m
	} else if err != nil {
		return err
	}
	body, err := s.readBody(q, s.cfg.MaxXMLBody, nil, false)
	if err != nil {
		return err
	}
	var req completeRequest
	if err := xml.Unmarshal(body, &req); err != nil {
		return errMalformedXML(err)
	}
	malformed := newErr("MalformedXML", http.StatusBadRequest, block.ErrInvalidArgument,
		"The XML you provided was not well-formed or did not validate against our published schema.")
	if len(req.Parts) == 0 {
		return malformed
	}
	list := make([]object.CompletedPart, len(req.Parts))
	for i, p := range req.Parts {
		if p.ETag == "" {
			return malformed
		}
		if p.PartNumber < 1 {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "PartNumber must be >= 1")
		}
		if p.PartNumber > object.MaxParts {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "Part number must be an integer between 1 and %d, inclusive.", object.MaxParts)
		}
		list[i] = object.CompletedPart{Number: p.PartNumber, ETag: p.ETag}
	}
	if done == nil {
		m, err := s.objs.CompleteUpload(q.r.Context(), q.bucket, q.r.URL.Query().Get("uploadId"), list, ifAbsent)
		if err != nil {
			return err
		}
		done = &m
	}
	return q.writeXML(completeResult{Xmlns: s3NS, Location: s.objectURL(q), Bucket: q.bucket, Key: q.key, ETag: done.ETag})
}

// objectURL is the absolute URL of q's object as the client addressed it
// (CompleteMultipartUpload's Location): http(s)://host/bucket/key, or
// http(s)://bucket.domain/key for a virtual-hosted-style request.
func (s *Server) objectURL(q *request) string {
	u := url.URL{Scheme: "http", Host: q.r.Host, Path: "/" + q.bucket + "/" + q.key}
	if q.r.TLS != nil {
		u.Scheme = "https"
	}
	if s.hostBucket(q.r.Host) != "" {
		u.Path = "/" + q.key
	}
	return u.String()
}

func (s *Server) abortUpload(q *request) error {
	if _, err := s.upload(q); err != nil {
		return err
	}
	if err := s.objs.AbortUpload(q.r.Context(), q.bucket, q.r.URL.Query().Get("uploadId")); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusNoContent)
}

type xmlPart struct {
	PartNumber   int    `xml:"PartNumber"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
}

type listPartsResult struct {
	XMLName              xml.Name  `xml:"ListPartsResult"`
	Xmlns                string    `xml:"xmlns,attr"`
	Bucket               string    `xml:"Bucket"`
	Key                  string    `xml:"Key"`
	UploadID             string    `xml:"UploadId"`
	Initiator            xmlOwner  `xml:"Initiator"`
	Owner                xmlOwner  `xml:"Owner"`
	StorageClass         string    `xml:"StorageClass"`
	PartNumberMarker     int       `xml:"PartNumberMarker"`
	NextPartNumberMarker int       `xml:"NextPartNumberMarker"`
	MaxParts             int       `xml:"MaxParts"`
	IsTruncated          bool      `xml:"IsTruncated"`
	Parts                []xmlPart `xml:"Part"`
}

func (s *Server) listParts(q *request) error {
	qs := q.r.URL.Query()
	maxParts, marker := 1000, 0
	if v := qs.Get("max-parts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "max-parts %q must be a non-negative integer", v)
		}
		maxParts = min(n, 1000)
	}
	if v := qs.Get("part-number-marker"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "part-number-marker %q must be a non-negative integer", v)
		}
		marker = n
	}
	if _, err := s.upload(q); err != nil {
		return err
	}
	_, parts, err := s.objs.ListParts(q.r.Context(), q.bucket, qs.Get("uploadId"), readLevel)
	if err != nil {
		return err
	}
	owner := xmlOwner{ID: q.auth.Credential.AccessKeyID, DisplayName: q.auth.Credential.AccessKeyID}
	res := listPartsResult{Xmlns: s3NS, Bucket: q.bucket, Key: q.key, UploadID: qs.Get("uploadId"), Initiator: owner, Owner: owner,
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: maxParts}
	for _, p := range parts {
		if p.Number <= marker {
			continue
		}
		if len(res.Parts) == maxParts {
			res.IsTruncated = true
			break
		}
		res.Parts = append(res.Parts, xmlPart{PartNumber: p.Number, LastModified: p.Modified.Format(time.RFC3339Nano), ETag: p.ETag, Size: p.Size})
		res.NextPartNumberMarker = p.Number
	}
	return q.writeXML(res)
}

type xmlUpload struct {
	Key          string   `xml:"Key"`
	UploadID     string   `xml:"UploadId"`
	Initiator    xmlOwner `xml:"Initiator"`
	Owner        xmlOwner `xml:"Owner"`
	StorageClass string   `xml:"StorageClass"`
	Initiated    string   `xml:"Initiated"`
}

type listUploadsResult struct {
	XMLName            xml.Name    `xml:"ListMultipartUploadsResult"`
	Xmlns              string      `xml:"xmlns,attr"`
	Bucket             string      `xml:"Bucket"`
	KeyMarker          string      `xml:"KeyMarker"`
	UploadIDMarker     string      `xml:"UploadIdMarker"`
	NextKeyMarker      string      `xml:"NextKeyMarker,omitempty"`
	NextUploadIDMarker string      `xml:"NextUploadIdMarker,omitempty"`
	Prefix             string      `xml:"Prefix"`
	Delimiter          string      `xml:"Delimiter,omitempty"`
	MaxUploads         int         `xml:"MaxUploads"`
	IsTruncated        bool        `xml:"IsTruncated"`
	Uploads            []xmlUpload `xml:"Upload"`
	CommonPrefixes     []xmlPrefix `xml:"CommonPrefixes"`
}

// listUploads lists the uploads in progress (none in a block namespace).
func (s *Server) listUploads(q *request) error {
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	qs := q.r.URL.Query()
	res := listUploadsResult{Xmlns: s3NS, Bucket: q.bucket, MaxUploads: 1000, Prefix: qs.Get("prefix"),
		KeyMarker: qs.Get("key-marker"), UploadIDMarker: qs.Get("upload-id-marker")}
	if v := qs.Get("max-uploads"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "max-uploads %q must be a non-negative integer", v)
		}
		res.MaxUploads = min(n, 1000)
	}
	if !ns.IsObject() {
		return q.writeXML(res)
	}
	ups, err := s.objs.ListUploads(q.r.Context(), q.bucket, res.Prefix, readLevel)
	if err != nil {
		return err
	}
	owner := xmlOwner{ID: q.auth.Credential.AccessKeyID, DisplayName: q.auth.Credential.AccessKeyID}
	for _, u := range ups {
		if u.Key < res.KeyMarker || (u.Key == res.KeyMarker && (res.UploadIDMarker == "" || u.ID <= res.UploadIDMarker)) {
			continue
		}
		if len(res.Uploads) == res.MaxUploads {
			res.IsTruncated = true
			break
		}
		res.Uploads = append(res.Uploads, xmlUpload{Key: u.Key, UploadID: u.ID, Initiator: owner, Owner: owner, StorageClass: "STANDARD",
			Initiated: u.Initiated.Format(time.RFC3339Nano)})
		res.NextKeyMarker, res.NextUploadIDMarker = u.Key, u.ID
	}
	if !res.IsTruncated {
		res.NextKeyMarker, res.NextUploadIDMarker = "", ""
	}
	return q.writeXML(res)
}

// sweepUploads aborts, in every object namespace, the uploads begun more
// than Config.UploadTTL ago, and deletes the data blocks of objects
// replaced or deleted more than Config.RetireGrace ago, every
// Config.UploadSweepEvery until ctx ends.
func (s *Server) sweepUploads(ctx context.Context) {
	t := time.NewTicker(s.cfg.UploadSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, ns := range s.store.Namespaces() {
			if !ns.IsObject() {
				continue
			}
			if n, err := s.objs.SweepUploads(ctx, ns.Name, s.cfg.UploadTTL); err != nil {
				s.log.Warn("s3 upload sweep failed", "bucket", ns.Name, "err", err)
			} else if n > 0 {
				s.log.Info("s3 abandoned uploads aborted", "bucket", ns.Name, "count", n)
			}
		}
	}
}
