package main

import (
	"context"
	"testing"
)

// TestS3VsHTTPRuns drives both protocols end to end at a tiny size: every
// request must succeed and every GET must return the whole block, or the
// run fails.
func TestS3VsHTTPRuns(t *testing.T) {
	for _, payload := range []string{"unsigned", "sha256"} {
		t.Run(payload, func(t *testing.T) {
			args := []string{"-block-size", "64KiB", "-blocks", "6", "-rounds", "2", "-concurrency", "2", "-payload", payload}
			if err := runS3VsHTTP(context.Background(), args); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestS3MultipartRuns uploads and downloads a small multipart object: every
// part, the completion and every ranged GET must succeed with the right
// bytes, or the run fails.
func TestS3MultipartRuns(t *testing.T) {
	args := []string{"-size", "11MiB", "-part-size", "5MiB", "-concurrency", "2", "-rounds", "1"}
	if err := runS3Multipart(context.Background(), args); err != nil {
		t.Fatal(err)
	}
}
