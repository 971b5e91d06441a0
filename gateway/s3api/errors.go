package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/s3auth"
)

// apiError is an S3 error response: its code, HTTP status and message. It
// wraps the sentinel it came from, so errcode (and metrics) see the same
// cause.
type apiError struct {
	Code   string
	Status int
	Msg    string
	// HeadersNotSigned names unsigned x-amz-* headers (AccessDenied).
	HeadersNotSigned string
	// Extra are further elements AWS puts in the body (ArgumentName, Region...).
	Extra []xmlExtra
	err   error
}

func (e *apiError) Error() string { return e.Code + ": " + e.Msg }
func (e *apiError) Unwrap() error { return e.err }

func newErr(code string, status int, sentinel error, format string, a ...any) *apiError {
	return &apiError{Code: code, Status: status, Msg: fmt.Sprintf(format, a...), err: sentinel}
}

// Errors the S3 layer raises itself.
func errNotImplemented(what string) *apiError {
	return newErr("NotImplemented", http.StatusNotImplemented, block.ErrInvalidArgument, "%s is not implemented by ctxtier", what)
}

func errMalformedXML(err error) *apiError {
	return newErr("MalformedXML", http.StatusBadRequest, block.ErrInvalidArgument, "the XML you provided was not well-formed: %v", err)
}

func errAccessDenied(bucket string) *apiError {
	return newErr("AccessDenied", http.StatusForbidden, block.ErrPermissionDenied, "access denied to bucket %q for this access key", bucket)
}

// toAPI maps an error to the S3 error response. Auth failures first (they
// have S3-specific codes), then the store's sentinels through errcode's table.
func toAPI(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	msg := err.Error()
	if m, ok := s3auth.Message(err); ok {
		msg = m // AWS's words for an authentication failure
	}
	if a := authAPI(err, msg); a != nil {
		for _, f := range s3auth.Fields(err) {
			a.Extra = append(a.Extra, xmlExtra{XMLName: xml.Name{Local: f[0]}, Value: f[1]})
		}
		return a
	}
	for _, m := range objectErrors {
		if errors.Is(err, m.err) {
			if m.msg != "" {
				msg = m.msg
			}
			return newErr(m.code, m.status, err, "%s", msg)
		}
	}
	switch errcode.Of(err) {
	case errcode.NotFound:
		return newErr("NoSuchKey", http.StatusNotFound, err, "The specified key does not exist.")
	case errcode.UnknownNamespace:
		return newErr("NoSuchBucket", http.StatusNotFound, err, "The specified bucket does not exist.")
	case errcode.Conflict:
		return newErr("BlockConflict", http.StatusConflict, err, "%s (blocks are immutable: a key keeps its first bytes)", msg)
	case errcode.ChecksumMismatch:
		return newErr("BadDigest", http.StatusBadRequest, err, "%s", msg)
	case errcode.TooLarge:
		return newErr("EntityTooLarge", http.StatusBadRequest, err, "%s", msg)
	case errcode.InvalidKey, errcode.InvalidArgument:
		return newErr("InvalidArgument", http.StatusBadRequest, err, "%s", msg)
	case errcode.NoSpace:
		return newErr("InsufficientStorage", http.StatusInsufficientStorage, err, "%s", msg)
	case errcode.QuotaExceeded:
		return newErr("QuotaExceeded", http.StatusInsufficientStorage, err, "%s", msg)
	case errcode.Unavailable, errcode.Closed:
		return newErr("ServiceUnavailable", http.StatusServiceUnavailable, err, "%s", msg)
	case errcode.NamespaceExists:
		return newErr("BucketAlreadyOwnedByYou", http.StatusConflict, err, "%s", msg)
	case errcode.NamespaceNotEmpty:
		return newErr("BucketNotEmpty", http.StatusConflict, err, "The bucket you tried to delete is not empty.")
	case errcode.Unauthenticated, errcode.PermissionDenied:
		return newErr("AccessDenied", http.StatusForbidden, err, "access denied")
	case errcode.Canceled, errcode.DeadlineExceeded:
		return newErr("RequestTimeout", http.StatusBadRequest, err, "%s", msg)
	}
	return newErr("InternalError", http.StatusInternalServerError, errcode.ErrInternal, "we encountered an internal error; please try again")
}

// objectErrors are the S3 codes of ctxstore/object's sentinels (each wraps
// a block sentinel, so errcode and metrics classify them too).
// The messages are AWS's own, which clients and conformance suites compare.
var objectErrors = []struct {
	err    error
	code   string
	status int
	msg    string // "" keeps the error's own text
}{
	{object.ErrNoSuchUpload, "NoSuchUpload", http.StatusNotFound,
		"The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."},
	{object.ErrInvalidPartOrder, "InvalidPartOrder", http.StatusBadRequest,
		"The list of parts was not in ascending order. Parts must be ordered by part number."},
	{object.ErrInvalidPart, "InvalidPart", http.StatusBadRequest,
		"One or more of the specified parts could not be found.  The part may not have been uploaded, or the specified entity tag may not match the part's entity tag."},
	{object.ErrEntityTooSmall, "EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed size"},
	{object.ErrPreconditionFailed, "PreconditionFailed", http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold."},
	{object.ErrKeyCollision, "ServiceUnavailable", http.StatusServiceUnavailable, ""},
	{object.ErrObjectChanged, "ServiceUnavailable", http.StatusServiceUnavailable, ""},
}

// authAPI maps s3auth's errors to S3 errors (nil for other errors).
func authAPI(err error, msg string) *apiError {
	var hns *s3auth.HeadersNotSignedError
	if errors.As(err, &hns) {
		ae := newErr("AccessDenied", http.StatusForbidden, err, "There were headers present in the request which were not signed")
		ae.HeadersNotSigned = strings.Join(hns.Headers, ", ")
		return ae
	}
	switch {
	case errors.Is(err, s3auth.ErrDate):
		return newErr("AccessDenied", http.StatusForbidden, err, "%s", msg)
	case errors.Is(err, s3auth.ErrAuthType):
		return newErr("InvalidArgument", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrQuery):
		return newErr("AuthorizationQueryParametersError", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrTrailer):
		return newErr("MalformedTrailerError", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrPayloadMalformed):
		return newErr("InvalidArgument", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrAnonymous):
		return newErr("AccessDenied", http.StatusForbidden, err, "anonymous access is not allowed; sign requests with SigV4")
	case errors.Is(err, s3auth.ErrUnknownKey):
		return newErr("InvalidAccessKeyId", http.StatusForbidden, err, "The AWS Access Key Id you provided does not exist in our records.")
	case errors.Is(err, s3auth.ErrSignature):
		return newErr("SignatureDoesNotMatch", http.StatusForbidden, err, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	case errors.Is(err, s3auth.ErrSkewed):
		return newErr("RequestTimeTooSkewed", http.StatusForbidden, err, "%s", msg)
	case errors.Is(err, s3auth.ErrExpired):
		return newErr("AccessDenied", http.StatusForbidden, err, "%s", msg)
	case errors.Is(err, s3auth.ErrSigV2):
		// AWS's exact words: s3cmd recognises them and retries with SigV4.
		return newErr("InvalidRequest", http.StatusBadRequest, err, "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
	case errors.Is(err, s3auth.ErrMalformed):
		return newErr("AuthorizationHeaderMalformed", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrUnsupported):
		return newErr("InvalidRequest", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrPayloadHash):
		return newErr("XAmzContentSHA256Mismatch", http.StatusBadRequest, err, "%s", msg)
	case errors.Is(err, s3auth.ErrChunk):
		return newErr("IncompleteBody", http.StatusBadRequest, err, "%s", msg)
	}
	return nil
}

// xmlExtra is one extra element of an error body.
type xmlExtra struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

type xmlError struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
	Key       string   `xml:"Key,omitempty"`
	Bucket    string   `xml:"BucketName,omitempty"`
	// HeadersNotSigned lists unsigned x-amz-* headers, as AWS does.
	HeadersNotSigned string `xml:"HeadersNotSigned,omitempty"`
	Extra            []xmlExtra
}
