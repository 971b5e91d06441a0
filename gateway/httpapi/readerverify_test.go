package httpapi

import (
	"bytes"
	"net/http"
	"slices"
	"testing"

	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// A whole-block GET that declares X-Ctxtier-Reader-Verifies: crc32c reaches
// the tier with ReaderVerifies (the DRAM tier may skip its own
// pass); every other read is served verified at rest, header or not.
func TestReaderVerifiesHeader(t *testing.T) {
	e := newEnv(t, nil)
	data := bytes.Repeat([]byte("reader verifies "), 64)
	path := "/v1/namespaces/default/blocks/00000000000000aa"
	if st, _, b := e.do(http.MethodPut, path, nil, bytes.NewReader(data)); st != http.StatusCreated {
		t.Fatalf("put: %d %s", st, b)
	}
	declared := map[string]string{httpwire.HeaderReaderVerifies: httpwire.ReaderVerifiesCRC32C}
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		status int
		marked bool
	}{
		{"declared", declared, http.StatusOK, true},
		{"no header", nil, http.StatusOK, false},
		{"other value", map[string]string{httpwire.HeaderReaderVerifies: "sha256"}, http.StatusOK, false},
		{"declared but ranged", map[string]string{httpwire.HeaderReaderVerifies: httpwire.ReaderVerifiesCRC32C, "Range": "bytes=0-99"}, http.StatusPartialContent, false},
		{"declared but conditional", map[string]string{httpwire.HeaderReaderVerifies: httpwire.ReaderVerifiesCRC32C, "If-None-Match": `"x"`}, http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.tier.TakeReaderMarks()
			st, hdr, body := e.do(http.MethodGet, path, tc.hdr, nil)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if st == http.StatusOK && (!bytes.Equal(body, data) || hdr.Get(httpwire.HeaderCRC) == "") {
				t.Fatalf("body of %d bytes, checksum header %q", len(body), hdr.Get(httpwire.HeaderCRC))
			}
			if got := e.tier.TakeReaderMarks(); !slices.Equal(got, []bool{tc.marked}) {
				t.Fatalf("tier reads marked %v, want [%v]", got, tc.marked)
			}
		})
	}
}
