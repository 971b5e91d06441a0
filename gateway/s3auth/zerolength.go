package s3auth

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/logging"

	"github.com/ctxtier/ctxtier/internal/sigv4"
)

// A client may sign "content-length:0" (awscrt, the native S3 client of
// LMCache's s3:// connector, does on CreateMultipartUpload, POST ?uploads with
// an empty body), but the SDK
// signer signs content-length only when it is above zero, so it cannot
// reproduce that canonical request. For those requests the SDK still builds
// the canonical request (URI and query canonicalized exactly as for every
// other request, captured through its signing log), the content-length line
// is added where SigV4 sorts it, and the signature is computed from that.

// canonicalCapture receives the SDK signer's signing log: its first
// argument is the canonical request.
type canonicalCapture struct{ canonical string }

func (c *canonicalCapture) Logf(_ logging.Classification, _ string, v ...any) {
	if len(v) > 0 {
		if s, ok := v[0].(string); ok {
			c.canonical = s
		}
	}
}

// zeroLengthSigned reports whether the client signed content-length on a
// request with an empty body, which the SDK signer leaves out.
func zeroLengthSigned(r *http.Request, signedStr string) bool {
	return r.ContentLength == 0 && slices.Contains(strings.Split(signedStr, ";"), "content-length")
}

// signZeroLength returns the SignedHeaders and signature of req (rebuilt by
// rebuild, without content-length) as a client that signed
// "content-length:0" computes them.
func (v *Verifier) signZeroLength(ctx context.Context, creds aws.Credentials, req *http.Request, payload string, t time.Time) (string, []byte, error) {
	var capture canonicalCapture
	err := v.signer.SignHTTP(ctx, creds, req, payload, "s3", v.cfg.Region, t, func(o *v4.SignerOptions) {
		o.LogSigning, o.Logger = true, &capture
	})
	if err != nil {
		return "", nil, fmt.Errorf("%w: signing failed", ErrSignature)
	}
	canonical, signed, err := withZeroContentLength(capture.canonical)
	if err != nil {
		return "", nil, err
	}
	return signed, sigv4.Signature(creds.SecretAccessKey, v.cfg.Region, "s3", t, canonical), nil
}

// withZeroContentLength adds "content-length:0" to a SigV4 canonical
// request (method, URI, query, one line per header, a blank line, the
// signed header list, the payload hash) and to its signed header list, both
// kept sorted; it returns the new canonical request and list.
func withZeroContentLength(canonical string) (string, string, error) {
	// The query line may be empty too: the blank line is the third from
	// the end.
	lines := strings.Split(canonical, "\n")
	blank := len(lines) - 3
	if len(lines) < 7 || lines[blank] != "" || slices.Contains(lines[3:blank], "") {
		return "", "", fmt.Errorf("%w: unexpected canonical request form", ErrSignature)
	}
	headers := slices.Clone(lines[3:blank])
	for _, h := range headers {
		if !strings.Contains(h, ":") {
			return "", "", fmt.Errorf("%w: unexpected canonical header line", ErrSignature)
		}
		if strings.HasPrefix(h, "content-length:") {
			return "", "", fmt.Errorf("%w: canonical request already has content-length", ErrSignature)
		}
	}
	headers = append(headers, "content-length:0")
	slices.SortFunc(headers, func(a, b string) int {
		return strings.Compare(a[:strings.IndexByte(a, ':')], b[:strings.IndexByte(b, ':')])
	})
	names := strings.Split(lines[blank+1], ";")
	names = append(names, "content-length")
	slices.Sort(names)
	signed := strings.Join(names, ";")
	out := slices.Concat(lines[:3], headers, []string{"", signed, lines[blank+2]})
	return strings.Join(out, "\n"), signed, nil
}
