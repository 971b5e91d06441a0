package block

import (
	"errors"
	"testing"
)

func TestNamespaceS3Fields(t *testing.T) {
	n := DefaultNamespaceConfig()
	if n.S3Disabled || n.S3TTLSeconds != 0 || n.Validate() != nil {
		t.Fatalf("default namespace must reach S3 without a limit: %+v", n)
	}
	n.S3TTLSeconds = -1
	if err := n.Validate(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative s3_ttl_seconds: %v", err)
	}
}
