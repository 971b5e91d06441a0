package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// TestSetQuota: PUT /v1/namespaces/{ns}/quota replaces the quotas in the
// catalog and answers the namespace with this node's usage; bad bodies are
// 400 and change nothing; with auth on, only a key scoped to "*" may set a
// quota (a tenant cannot raise its own).
func TestSetQuota(t *testing.T) {
	e := newAuthEnv(t)
	e.srv.usage = func() map[block.Tier]map[string]int64 {
		return map[block.Tier]map[string]int64{block.TierDRAM: {"a": 123}, block.TierNVMe: {"b": 7}}
	}
	tests := []struct {
		name      string
		ns        string
		key       map[string]string
		body      string
		want      int
		wantCode  string
		wantQuota block.Quota // of namespace "a" afterwards
	}{
		{"operator sets", "a", bearer(keyAll), `{"dram":1048576,"nvme":2097152}`, 200, "", block.Quota{DRAM: 1 << 20, NVMe: 2 << 20}},
		{"tenant key refused", "a", bearer(keyA), `{"dram":999999999999}`, 403, "PermissionDenied", block.Quota{DRAM: 1 << 20, NVMe: 2 << 20}},
		{"anonymous refused", "a", nil, `{"dram":1}`, 401, "Unauthenticated", block.Quota{DRAM: 1 << 20, NVMe: 2 << 20}},
		{"negative", "a", bearer(keyAll), `{"dram":-1}`, 400, "InvalidArgument", block.Quota{DRAM: 1 << 20, NVMe: 2 << 20}},
		{"unknown field", "a", bearer(keyAll), `{"ram":1}`, 400, "InvalidArgument", block.Quota{DRAM: 1 << 20, NVMe: 2 << 20}},
		{"unknown namespace", "zz", bearer(keyAll), `{"dram":1}`, 404, "UnknownNamespace", block.Quota{DRAM: 1 << 20, NVMe: 2 << 20}},
		{"replace all", "a", bearer(keyAll), `{"s3":5}`, 200, "", block.Quota{S3: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Content-Type": jsonType}
			for k, v := range tt.key {
				hdr[k] = v
			}
			status, h, body := e.do("PUT", "/v1/namespaces/"+tt.ns+"/quota", hdr, strings.NewReader(tt.body))
			if status != tt.want || h.Get("X-Ctxtier-Error-Code") != tt.wantCode {
				t.Fatalf("status %d code %q, want %d %q: %s", status, h.Get("X-Ctxtier-Error-Code"), tt.want, tt.wantCode, body)
			}
			if status == http.StatusOK {
				var st httpwire.NamespaceStatus
				if err := json.Unmarshal(body, &st); err != nil {
					t.Fatal(err)
				}
				if st.Quota != tt.wantQuota || st.Usage[block.TierDRAM] != 123 || st.Usage[block.TierNVMe] != 0 {
					t.Fatalf("answer %+v", st)
				}
			}
			ns, err := e.srv.store.Namespace("a")
			if err != nil || ns.Quota != tt.wantQuota {
				t.Fatalf("catalog holds %+v (%v), want %+v", ns.Quota, err, tt.wantQuota)
			}
		})
	}
	// GET shows the quota and the usage.
	status, _, body := e.do("GET", "/v1/namespaces/b", bearer(keyAll), nil)
	var st httpwire.NamespaceStatus
	if status != 200 || json.Unmarshal(body, &st) != nil || st.Usage[block.TierNVMe] != 7 || st.Usage[block.TierDRAM] != 0 {
		t.Fatalf("GET b: %d %s", status, body)
	}
}
