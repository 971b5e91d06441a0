package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

type xmlBucket struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
	BucketRegion string `xml:"BucketRegion"`
}

type xmlOwner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type listBucketsResult struct {
	XMLName           xml.Name    `xml:"ListAllMyBucketsResult"`
	Xmlns             string      `xml:"xmlns,attr"`
	Owner             xmlOwner    `xml:"Owner"`
	Buckets           []xmlBucket `xml:"Buckets>Bucket"`
	ContinuationToken string      `xml:"ContinuationToken,omitempty"`
	Prefix            string      `xml:"Prefix,omitempty"`
}

// maxBuckets is S3's bound on ListBuckets' max-buckets.
const maxBuckets = 10000

// listBuckets lists the namespaces the key's scope covers, in name order,
// filtered by prefix and paged by max-buckets and continuation-token.
// Namespaces carry no creation time, so every bucket reports the server's
// start time.
func (s *Server) listBuckets(q *request) error {
	qs := q.r.URL.Query()
	limit := maxBuckets
	if v := qs.Get("max-buckets"); v != "" || qs.Has("max-buckets") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxBuckets {
			return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "Argument max-buckets must be an integer between 1 and %d.", maxBuckets)
		}
		limit = n
	}
	after := ""
	if qs.Has("continuation-token") {
		c, err := decodeToken(qs.Get("continuation-token"))
		if err != nil {
			return err
		}
		after = c
	}
	prefix := qs.Get("prefix")
	// The owner is the requester: every bucket it may see is "its own".
	owner := q.auth.Credential.AccessKeyID
	res := listBucketsResult{Xmlns: s3NS, Owner: xmlOwner{ID: owner, DisplayName: owner}, Buckets: []xmlBucket{}, Prefix: prefix}
	created := s.started.Format(time.RFC3339)
	names := make([]string, 0)
	for _, ns := range s.store.Namespaces() {
		if q.auth.Credential.Allows(ns.Name) && strings.HasPrefix(ns.Name, prefix) && ns.Name > after {
			names = append(names, ns.Name)
		}
	}
	sort.Strings(names)
	if len(names) > limit {
		names = names[:limit]
		res.ContinuationToken = encodeToken(names[limit-1])
	}
	for _, n := range names {
		res.Buckets = append(res.Buckets, xmlBucket{Name: n, CreationDate: created, BucketRegion: s.cfg.Region})
	}
	return q.writeXML(res)
}

// validBucketName applies S3's rules for new bucket names (on top of the
// namespace rules): 3..63 characters of a-z, 0-9, '.' and '-', starting and
// ending with a letter or digit, no "..", not shaped like an IPv4 address,
// and none of the prefixes and suffixes S3 reserves.
func validBucketName(name string) error {
	// AWS's message names no rule; the wrapped cause (logged, in metrics) does.
	bad := func(why string) error {
		return newErr("InvalidBucketName", http.StatusBadRequest, fmt.Errorf("%w: %s", block.ErrInvalidArgument, why), "The specified bucket is not valid.")
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("a bucket name is 3..63 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '.' && c != '-' {
			return bad("only lower-case letters, digits, '.' and '-' are allowed")
		}
	}
	alnum := func(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }
	switch {
	case !alnum(name[0]) || !alnum(name[len(name)-1]):
		return bad("a bucket name starts and ends with a letter or digit")
	case strings.Contains(name, ".."):
		return bad("two adjacent periods")
	case strings.Contains(name, ".-") || strings.Contains(name, "-."):
		return bad("a period next to a hyphen")
	case net.ParseIP(name) != nil:
		return bad("a bucket name cannot be an IP address")
	case strings.HasPrefix(name, "xn--") || strings.HasPrefix(name, "sthree-") || strings.HasPrefix(name, "amzn-s3-demo-"):
		return bad("the prefix is reserved")
	case strings.HasSuffix(name, "-s3alias") || strings.HasSuffix(name, "--ol-s3") || strings.HasSuffix(name, ".mrap") ||
		strings.HasSuffix(name, "--x-s3") || strings.HasSuffix(name, "--table-s3"):
		return bad("the suffix is reserved")
	}
	return nil
}

type createBucketConfig struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

// createBucket creates a namespace with the default policy. An existing
// namespace is 409 BucketAlreadyOwnedByYou, whatever its definition.
func (s *Server) createBucket(q *request) error {
	if err := validBucketName(q.bucket); err != nil {
		return err
	}
	if err := block.ValidNamespaceName(q.bucket); err != nil {
		return newErr("InvalidBucketName", http.StatusBadRequest, err, "The specified bucket is not valid.")
	}
	body, err := s.readBody(q, s.cfg.MaxXMLBody, nil, false)
	if err != nil {
		return err
	}
	if len(body) > 0 {
		var cfg createBucketConfig
		if err := xml.Unmarshal(body, &cfg); err != nil {
			return errMalformedXML(err)
		}
		if cfg.LocationConstraint != "" && cfg.LocationConstraint != s.cfg.Region {
			return newErr("InvalidLocationConstraint", http.StatusBadRequest, block.ErrInvalidArgument,
				"The specified location-constraint is not valid")
		}
	}
	if _, err := s.store.Namespace(q.bucket); err == nil {
		return newErr("BucketAlreadyOwnedByYou", http.StatusConflict, block.ErrNamespaceExists, "bucket %q already exists", q.bucket)
	}
	ns := block.DefaultNamespaceConfig()
	ns.Name, ns.Kind = q.bucket, block.KindObject
	if err := s.store.CreateNamespace(q.r.Context(), ns); err != nil {
		return err
	}
	q.w.Header().Set("Location", "/"+q.bucket)
	return q.writeEmpty(http.StatusOK)
}

func (s *Server) headBucket(q *request) error {
	if _, err := s.store.Namespace(q.bucket); err != nil {
		return err
	}
	q.w.Header().Set("X-Amz-Bucket-Region", s.cfg.Region)
	return q.writeEmpty(http.StatusOK)
}

func (s *Server) deleteBucket(q *request) error {
	if ns, err := s.store.Namespace(q.bucket); err == nil && ns.IsObject() {
		// As in S3, uploads in progress do not keep a bucket alive: with no
		// object left, abort them (and their parts) first.
		es, err := s.objs.ListObjects(q.r.Context(), q.bucket, "", readLevel)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			if _, err := s.objs.SweepUploads(q.r.Context(), q.bucket, 0); err != nil {
				return err
			}
		}
	}
	if err := s.store.DeleteNamespace(q.r.Context(), q.bucket); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusNoContent)
}

type locationResult struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

func (s *Server) getLocation(q *request) error {
	if _, err := s.store.Namespace(q.bucket); err != nil {
		return err
	}
	region := s.cfg.Region
	if region == "us-east-1" {
		region = "" // S3 spells us-east-1 as an empty constraint
	}
	return q.writeXML(locationResult{Xmlns: s3NS, Region: region})
}

type versioningResult struct {
	XMLName xml.Name `xml:"VersioningConfiguration"`
	Xmlns   string   `xml:"xmlns,attr"`
}

// getVersioning reports versioning as never enabled: blocks are immutable.
func (s *Server) getVersioning(q *request) error {
	if _, err := s.store.Namespace(q.bucket); err != nil {
		return err
	}
	return q.writeXML(versioningResult{Xmlns: s3NS})
}

// ---- DeleteObjects ----

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key string `xml:"Key"`
	} `xml:"Object"`
}

type deletedXML struct {
	Key string `xml:"Key"`
}

type deleteErrorXML struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

type deleteResult struct {
	XMLName xml.Name         `xml:"DeleteResult"`
	Xmlns   string           `xml:"xmlns,attr"`
	Deleted []deletedXML     `xml:"Deleted"`
	Errors  []deleteErrorXML `xml:"Error"`
}

// maxDeleteObjects is S3's limit on keys per DeleteObjects request.
const maxDeleteObjects = 1000

// deleteObjects evicts up to 1000 blocks. An absent block counts as deleted
// (as in S3); an invalid key is reported per key as InvalidArgument.
func (s *Server) deleteObjects(q *request) error {
	body, err := s.readBody(q, s.cfg.MaxXMLBody, nil, false)
	if err != nil {
		return err
	}
	var req deleteRequest
	if err := xml.Unmarshal(body, &req); err != nil {
		return errMalformedXML(err)
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteObjects {
		return errMalformedXML(fmt.Errorf("a Delete request names 1..%d objects, not %d", maxDeleteObjects, len(req.Objects)))
	}
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	res := deleteResult{Xmlns: s3NS}
	for _, o := range req.Objects {
		if ns.IsObject() {
			if err := s.deleteKeyNS(q.r.Context(), q.bucket, o.Key); err != nil {
				ae := toAPI(err)
				res.Errors = append(res.Errors, deleteErrorXML{Key: o.Key, Code: ae.Code, Message: ae.Msg})
			} else if !req.Quiet {
				res.Deleted = append(res.Deleted, deletedXML{Key: o.Key})
			}
			continue
		}
		k, err := block.ParseObjectName(q.bucket, o.Key)
		if err == nil {
			err = s.store.Delete(q.r.Context(), k)
			if errors.Is(err, block.ErrNotFound) {
				err = nil
			}
		}
		if err != nil {
			ae := toAPI(err)
			res.Errors = append(res.Errors, deleteErrorXML{Key: o.Key, Code: ae.Code, Message: ae.Msg})
			continue
		}
		if !req.Quiet {
			res.Deleted = append(res.Deleted, deletedXML{Key: o.Key})
		}
	}
	return q.writeXML(res)
}

// ---- Lifecycle: expiration days set the namespace's TTL ----

type anyElem struct {
	XMLName xml.Name
}

type lifecycleFilter struct {
	Prefix string    `xml:"Prefix"`
	Other  []anyElem `xml:",any"`
}

type lifecycleExpiration struct {
	Days  int       `xml:"Days,omitempty"`
	Other []anyElem `xml:",any"`
}

type lifecycleRule struct {
	ID         string               `xml:"ID,omitempty"`
	Status     string               `xml:"Status"`
	Prefix     *string              `xml:"Prefix,omitempty"`
	Filter     *lifecycleFilter     `xml:"Filter,omitempty"`
	Expiration *lifecycleExpiration `xml:"Expiration,omitempty"`
	Other      []anyElem            `xml:",any"`
}

type lifecycleConfig struct {
	XMLName xml.Name        `xml:"LifecycleConfiguration"`
	Xmlns   string          `xml:"xmlns,attr,omitempty"`
	Rules   []lifecycleRule `xml:"Rule"`
}

// maxTTLDays keeps TTLSeconds far from overflow.
const maxTTLDays = 36500

func invalidLifecycle(format string, a ...any) error {
	return newErr("InvalidArgument", http.StatusBadRequest, block.ErrInvalidArgument, "lifecycle: "+format, a...)
}

// ttlFromLifecycle maps a lifecycle configuration to a TTL: one enabled rule
// covering the whole bucket with Expiration Days sets it; no enabled rule
// clears it. Anything a namespace cannot express is refused, not ignored.
func ttlFromLifecycle(cfg lifecycleConfig) (int64, error) {
	var ttl int64
	enabled := 0
	for _, r := range cfg.Rules {
		switch r.Status {
		case "Enabled":
		case "Disabled":
			continue
		default:
			return 0, invalidLifecycle("rule %q: Status must be Enabled or Disabled", r.ID)
		}
		for _, o := range r.Other {
			if o.XMLName.Local != "AbortIncompleteMultipartUpload" {
				return 0, invalidLifecycle("rule %q: %s is not supported (only Expiration Days)", r.ID, o.XMLName.Local)
			}
		}
		if (r.Prefix != nil && *r.Prefix != "") || (r.Filter != nil && (r.Filter.Prefix != "" || len(r.Filter.Other) > 0)) {
			return 0, invalidLifecycle("rule %q: a TTL applies to the whole namespace; filters are not supported", r.ID)
		}
		if r.Expiration == nil {
			continue
		}
		if len(r.Expiration.Other) > 0 || r.Expiration.Days < 1 || r.Expiration.Days > maxTTLDays {
			return 0, invalidLifecycle("rule %q: Expiration must be Days in 1..%d", r.ID, maxTTLDays)
		}
		enabled++
		ttl = int64(r.Expiration.Days) * 86400
	}
	if enabled > 1 {
		return 0, invalidLifecycle("%d enabled expiration rules; a namespace has one TTL", enabled)
	}
	return ttl, nil
}

func (s *Server) putLifecycle(q *request) error {
	body, err := s.readBody(q, s.cfg.MaxXMLBody, nil, false)
	if err != nil {
		return err
	}
	var cfg lifecycleConfig
	if err := xml.Unmarshal(body, &cfg); err != nil {
		return errMalformedXML(err)
	}
	ttl, err := ttlFromLifecycle(cfg)
	if err != nil {
		return err
	}
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	ns.TTLSeconds = ttl
	if err := s.store.UpdateNamespace(q.r.Context(), ns); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusOK)
}

// getLifecycle renders the TTL as one rule. A TTL that is not whole days
// (set through the namespace config) is rounded up, and the rule's ID names
// the exact seconds.
func (s *Server) getLifecycle(q *request) error {
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	if ns.TTLSeconds == 0 {
		return newErr("NoSuchLifecycleConfiguration", http.StatusNotFound, block.ErrNotFound, "the lifecycle configuration does not exist")
	}
	days := (ns.TTLSeconds + 86399) / 86400
	id := "ctxtier-ttl"
	if ns.TTLSeconds%86400 != 0 {
		id = "ctxtier-ttl-" + strconv.FormatInt(ns.TTLSeconds, 10) + "s"
	}
	empty := ""
	return q.writeXML(lifecycleConfig{Xmlns: s3NS, Rules: []lifecycleRule{{
		ID: id, Status: "Enabled", Filter: &lifecycleFilter{Prefix: empty}, Expiration: &lifecycleExpiration{Days: int(days)},
	}}})
}

func (s *Server) deleteLifecycle(q *request) error {
	ns, err := s.store.Namespace(q.bucket)
	if err != nil {
		return err
	}
	ns.TTLSeconds = 0
	if err := s.store.UpdateNamespace(q.r.Context(), ns); err != nil {
		return err
	}
	return q.writeEmpty(http.StatusNoContent)
}
