package clusterapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
)

func newRecorder(h http.Handler, method, path string, body []byte, hdr http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
