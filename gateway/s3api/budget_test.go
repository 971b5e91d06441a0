package s3api

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/internal/membudget"
)

// signedPut returns a SigV4-signed PutObject request (UNSIGNED-PAYLOAD).
func (e *env) signedPut(t *testing.T, obj string, body io.Reader, size int64) *http.Request {
	t.Helper()
	return e.signedPutPath(t, "/team-a/"+obj, body, size)
}

// signedPutPath is signedPut to a path of the form /BUCKET/KEY.
func (e *env) signedPutPath(t *testing.T, path string, body io.Reader, size int64) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://"+e.addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: e.admin.AccessKeyID, SecretAccessKey: e.admin.Secret}
	if err := signer.SignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// TestPutObjectWaitsForBudget: a stalled PutObject holds its bytes of the
// in-flight budget; another that does not fit beside it waits unread
// until the stalled one goes away.
func TestPutObjectWaitsForBudget(t *testing.T) {
	b, err := membudget.New(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, func(c *Config) { c.Budget = b }, nil)
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	// One byte of a 3 MiB body, then nothing.
	pr, pw := io.Pipe()
	stalled := e.signedPut(t, objName(1), pr, 3<<20)
	go stalled.Write(nc)
	pw.Write([]byte{'x'})
	deadline := time.Now().Add(5 * time.Second)
	for b.InUse() != 3<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled upload holds %d bytes", b.InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(e.signedPut(t, objName(2), bytes.NewReader(payload(2<<20, 7)), 2<<20))
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	deadline = time.Now().Add(5 * time.Second)
	for b.Waits() == 0 {
		select {
		case st := <-done:
			t.Fatalf("the put did not wait for the budget: %d", st)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the second put never waited for the budget")
		}
	}
	select {
	case st := <-done:
		t.Fatalf("the put did not wait for the budget: %d", st)
	case <-time.After(200 * time.Millisecond):
	}
	pw.CloseWithError(io.ErrUnexpectedEOF)
	nc.Close()
	select {
	case st := <-done:
		if st != http.StatusOK {
			t.Fatalf("put after the stall ended: %d", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the put never got the budget")
	}
	deadline = time.Now().Add(5 * time.Second)
	for b.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held", b.InUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
