package s3api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestAnonymousIsForbidden(t *testing.T) {
	e := newEnv(t)
	for _, target := range []string{"/", "/default", "/default/" + objName(1), "/team-a?list-type=2"} {
		resp, err := http.Get("http://" + e.addr + target)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !bytes.Contains(body, []byte("<Code>AccessDenied</Code>")) || resp.Header.Get("Content-Type") != "application/xml" {
			t.Errorf("anonymous GET %s: %d %s", target, resp.StatusCode, body)
		}
	}
}

func TestParseRange(t *testing.T) {
	cases := []struct {
		h           string
		first, last int64
		ok, invalid bool
	}{
		{"bytes=0-9", 0, 9, true, false},
		{"bytes=5-", 5, 99, true, false},
		{"bytes=-10", 90, 99, true, false},
		{"bytes=-1000", 0, 99, true, false},
		{"bytes=90-1000", 90, 99, true, false},
		{"bytes=100-", 0, 0, false, true},
		{"bytes=-0", 0, 0, false, true},
		{"bytes=0-1,5-6", 0, 0, false, false}, // multi-range: whole object
		{"bytes=9-5", 0, 0, false, false},
		{"items=0-1", 0, 0, false, false},
		{"bytes=x-y", 0, 0, false, false},
	}
	for _, tc := range cases {
		f, l, ok, err := parseRange(tc.h, 100)
		if ok != tc.ok || (err != nil) != tc.invalid || (ok && (f != tc.first || l != tc.last)) {
			t.Errorf("parseRange(%q) = %d, %d, %v, %v", tc.h, f, l, ok, err)
		}
	}
}

// TestListDelimiter rolls parts ("<hash>.N") up into one common prefix per
// hash and pages through prefixes and objects alike.
func TestListDelimiter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for h := uint64(1); h <= 3; h++ {
		for p := uint16(0); p < 3; p++ {
			if err := e.store.Put(ctx, block.NewKey("team-a", h).WithPart(p), []byte{byte(h), byte(p)}, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.store.Put(ctx, block.NewKey("team-a", 9), []byte("whole"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c := awsClient(e, e.teamA)
	var prefixes, keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("team-a"), Delimiter: aws.String("."), MaxKeys: aws.Int32(2)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(prefixes) != 3 || prefixes[0] != objName(1)+"." || len(keys) != 1 || keys[0] != objName(9) {
		t.Fatalf("prefixes %v keys %v", prefixes, keys)
	}
	// v1 listing with a marker.
	out, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("team-a"), Marker: aws.String(objName(3) + ".1")})
	if err != nil || len(out.Contents) != 2 {
		t.Fatalf("ListObjects v1 after marker: %v %v", out, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for i, mut := range []func(*Config){
		func(c *Config) { c.Region = "" },
		func(c *Config) { c.MaxObjectSize = 0 },
		func(c *Config) { c.MaxClockSkew = 0 },
		func(c *Config) { c.MaxKeys = 0 },
		func(c *Config) { c.MaxXMLBody = 1 },
		func(c *Config) { c.RetireGrace = -time.Second },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("mutation %d: %v", i, err)
		}
	}
}

// FuzzLifecycle feeds arbitrary XML to the lifecycle mapping: it must not
// panic and any TTL it accepts must be whole days within bounds.
func FuzzLifecycle(f *testing.F) {
	f.Add([]byte(`<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter><Prefix></Prefix></Filter><Expiration><Days>2</Days></Expiration></Rule></LifecycleConfiguration>`))
	f.Add([]byte(`<LifecycleConfiguration><Rule><Status>Enabled</Status><Transition><Days>1</Days></Transition></Rule></LifecycleConfiguration>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var cfg lifecycleConfig
		if xmlErr := xmlUnmarshal(b, &cfg); xmlErr != nil {
			return
		}
		ttl, err := ttlFromLifecycle(cfg)
		if err == nil && (ttl < 0 || ttl%86400 != 0 || ttl > maxTTLDays*86400) {
			t.Fatalf("accepted ttl %d", ttl)
		}
	})
}
