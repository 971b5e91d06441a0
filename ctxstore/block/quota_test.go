package block

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestQuotaValidateAndJSON: negative quotas are refused, 0 is unlimited,
// and a namespace without quotas has no "quota" field in its JSON.
func TestQuotaValidateAndJSON(t *testing.T) {
	tests := []struct {
		name    string
		q       Quota
		wantErr bool
		json    string
	}{
		{"none", Quota{}, false, `{"name":"a","block_tokens":512,"hash_scheme":"dynamo-xxh3","max_block_size":67108864,"priority":0,"write_mode":"write-back","data_shards":1}`},
		{"dram", Quota{DRAM: 1 << 20}, false, `{"name":"a","block_tokens":512,"hash_scheme":"dynamo-xxh3","max_block_size":67108864,"priority":0,"write_mode":"write-back","data_shards":1,"quota":{"dram":1048576}}`},
		{"negative nvme", Quota{NVMe: -1}, true, ""},
		{"negative s3", Quota{S3: -5}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := DefaultNamespaceConfig()
			ns.Name, ns.Quota = "a", tt.q
			err := ns.Validate()
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("Validate = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(ns)
			if string(b) != tt.json {
				t.Fatalf("json %s\nwant %s", b, tt.json)
			}
			var back Namespace
			if err := json.Unmarshal(b, &back); err != nil || back != ns {
				t.Fatalf("json round trip: %+v (%v)", back, err)
			}
			if back.Quota.Of(TierDRAM) != tt.q.DRAM || back.Quota.Of(TierNVMe) != tt.q.NVMe || back.Quota.Of(TierS3) != tt.q.S3 {
				t.Fatalf("Of disagrees with the fields: %+v", back.Quota)
			}
		})
	}
}
