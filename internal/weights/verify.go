package weights

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// Chunk digests. A manifest records, per chunk, a SHA-256 (always) and an
// XXH3-128 (manifests written since XXH3 was added: File.ChunksXXH3). A
// pull checks each chunk with the digest Config.Verify names; with
// VerifyXXH3 and a manifest that has no XXH3 digests it falls back to
// SHA-256. The manifest is read from the same tier as the bytes, so a
// cryptographic digest in it protects nothing against whoever can write
// the tier; against corruption and mix-ups a 128-bit non-cryptographic
// hash is as good, at a fraction of the CPU (docs/weights.md).

// Config.Verify values.
const (
	// VerifyXXH3 checks chunks with their XXH3-128 (SHA-256 when the
	// manifest has none). The default.
	VerifyXXH3 = "xxh3"
	// VerifySHA256 checks chunks with their SHA-256.
	VerifySHA256 = "sha256"
)

// digest names the digest a chunk of f is checked with: VerifyXXH3 when
// verify asks for it and the manifest has it, else VerifySHA256.
func digest(verify string, f File) string {
	if verify == VerifyXXH3 && len(f.ChunksXXH3) > 0 {
		return VerifyXXH3
	}
	return VerifySHA256
}

// readerVerifies is the httpwire.HeaderReaderVerifies value a GET checked
// with alg declares: the S3 endpoint then reads the object's data blocks
// without the DRAM tier's at-rest check (docs/s3.md).
func readerVerifies(alg string) string {
	if alg == VerifyXXH3 {
		return httpwire.ReaderVerifiesXXH3
	}
	return httpwire.ReaderVerifiesSHA256
}

// chunkOK reports whether b is chunk i of f by the digest alg.
func chunkOK(alg string, f File, i int, b []byte) bool {
	if alg == VerifyXXH3 {
		return xxh3Hex(b) == f.ChunksXXH3[i]
	}
	return sumHex(b) == f.Chunks[i]
}

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func xxh3Hex(b []byte) string {
	s := xxh3.Hash128(b).Bytes()
	return hex.EncodeToString(s[:])
}

// complete reports whether dst already holds f: its size and, by the
// digest verify picks for f, every chunk's XXH3-128 or the whole file's
// SHA-256.
func complete(dst string, f File, chunk int64, verify string) (bool, error) {
	fh, err := os.Open(dst)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() != f.Size {
		return false, err
	}
	if digest(verify, f) == VerifySHA256 {
		h := sha256.New()
		if _, err := io.Copy(h, fh); err != nil {
			return false, err
		}
		return hex.EncodeToString(h.Sum(nil)) == f.SHA256, nil
	}
	buf := make([]byte, min(chunk, f.Size))
	for i := range f.ChunksXXH3 {
		off, n := chunkSpan(chunk, f.Size, i)
		if _, err := fh.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("weights: read %s: %w", dst, err)
		}
		if !chunkOK(VerifyXXH3, f, i, buf[:n]) {
			return false, nil
		}
	}
	return true, nil
}
