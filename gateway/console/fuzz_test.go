package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzActionBody feeds arbitrary bodies to an admin's drain action. The
// invariants: the handler answers 200 exactly when the body is one JSON
// object with only a non-empty string "id" (within the size limit), and
// then the cluster was asked to drain exactly that id; any other body is
// a 4xx with the standard error code header and asks the cluster nothing.
func FuzzActionBody(f *testing.F) {
	for _, seed := range []string{
		`{"id":"n2"}`, `{"id":""}`, `{}`, `{"id":"n2","x":1}`, `{"id":"n2"}{}`, `{"id":"n2"} `,
		`{"id":7}`, `[]`, `null`, ``, `{"ID":"n2"}`, `{"id":"n\u00e9"}`, `{"id":"a","id":"b"}`, "{\"id\":\"n2\"}\n",
	} {
		f.Add([]byte(seed))
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		e.cl.mu.Lock()
		e.cl.actions = nil
		e.cl.mu.Unlock()
		req := httptest.NewRequest(http.MethodPost, "/ui/api/actions/drain", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer ADMIN:s3cret")
		rec := httptest.NewRecorder()
		e.c.Handler().ServeHTTP(rec, req)

		// What a strict reading of the body allows.
		var want *string
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var ar ActionRequest
		if int64(len(body)) <= DefaultConfig().MaxBodyBytes && dec.Decode(&ar) == nil && !dec.More() && ar.ID != "" {
			want = &ar.ID
		}
		e.cl.mu.Lock()
		asked := append([]string(nil), e.cl.actions...)
		e.cl.mu.Unlock()
		if want != nil {
			if rec.Code != http.StatusOK || len(asked) != 1 || asked[0] != "drain "+*want {
				t.Fatalf("body %q: %d %s, cluster asked %q; want 200 and drain %q", body, rec.Code, rec.Body, asked, *want)
			}
			return
		}
		if rec.Code < 400 || rec.Code >= 500 || rec.Header().Get("X-Ctxtier-Error-Code") == "" || len(asked) != 0 {
			t.Fatalf("body %q: %d %s, cluster asked %q; want a 4xx with an error code and no action", body, rec.Code, rec.Body, asked)
		}
	})
}
