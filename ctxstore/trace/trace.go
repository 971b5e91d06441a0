// Package trace reads Mooncake-format request traces (FAST'25): one JSON
// object per line with timestamp (ms), input_length and output_length
// (tokens) and hash_ids, the prefix-chained ids of the request's blocks
// (512 tokens per block in the published traces).
package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// MooncakeBlockTokens is the block size, in tokens, of the published traces.
const MooncakeBlockTokens = 512

// Request is one line of a trace.
type Request struct {
	TimestampMs  int64    `json:"timestamp"`
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// Read parses a whole trace from r. Blank lines are skipped; a malformed line
// is an error naming its line number.
func Read(r io.Reader) ([]Request, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out []Request
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var req Request
		if err := json.Unmarshal(b, &req); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		if req.InputLength < 0 || req.OutputLength < 0 {
			return nil, fmt.Errorf("trace line %d: negative length", line)
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace line %d: %w", line+1, err)
	}
	return out, nil
}

// ReadFile parses the trace at path.
func ReadFile(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// InfiniteCacheHitRatio is the block hit ratio of a cache that never evicts,
// with prefix semantics: a request's blocks hit until its first miss. It is
// the upper bound any policy can reach on the trace.
func InfiniteCacheHitRatio(reqs []Request) float64 {
	seen := make(map[uint64]struct{})
	var hits, total int
	for _, r := range reqs {
		miss := false
		for _, h := range r.HashIDs {
			total++
			if _, ok := seen[h]; ok && !miss {
				hits++
			} else {
				miss = true
			}
			seen[h] = struct{}{}
		}
	}
	if total == 0 {
		return 0
	}
	return float64(hits) / float64(total)
}
