// Package trace reads Mooncake-format request traces (FAST'25): one JSON
// object per line with timestamp (ms), input_length and output_length
// (tokens) and hash_ids, the prefix-chained ids of the request's blocks
// (512 tokens per block in the published traces). A request may also carry
// the optional agent fields of ctxbench's agentic traces: session and
// parent_session ids and a hints record; Mooncake traces without them read
// as before.
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
	// Session and ParentSession name the agent session that sent the
	// request and, for a sub-agent, the session it forked from (optional).
	Session       string `json:"session,omitempty"`
	ParentSession string `json:"parent_session,omitempty"`
	// Hints is the harness's knowledge about the request (optional).
	Hints *Hints `json:"hints,omitempty"`
}

// Hints is what an agent harness knows about a request's blocks.
type Hints struct {
	// Priority is the eviction class (lower is evicted first).
	Priority uint8 `json:"priority,omitempty"`
	// SharedPrefixBlocks counts the leading blocks shared across sessions
	// (system prompt and tool definitions).
	SharedPrefixBlocks int `json:"shared_prefix_blocks,omitempty"`
	// ResumeWithinMs: the harness expects to send this context again within
	// that many milliseconds (a tool call is running); 0 means no claim.
	ResumeWithinMs int64 `json:"resume_within_ms,omitempty"`
	// SessionEnd: the session is finished after this request; its own
	// blocks will not be used again (its shared prefix still may).
	SessionEnd bool `json:"session_end,omitempty"`
	// EphemeralTailBlocks counts the trailing blocks that will never be
	// reused (reasoning and output the next turn does not resend).
	EphemeralTailBlocks int `json:"ephemeral_tail_blocks,omitempty"`
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
		if h := req.Hints; h != nil {
			n := len(req.HashIDs)
			if h.SharedPrefixBlocks < 0 || h.SharedPrefixBlocks > n || h.EphemeralTailBlocks < 0 || h.EphemeralTailBlocks > n || h.ResumeWithinMs < 0 {
				return nil, fmt.Errorf("trace line %d: hints out of range for %d blocks: %+v", line, n, *h)
			}
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace line %d: %w", line+1, err)
	}
	return out, nil
}

// Write writes reqs as JSON lines, the format Read reads.
func Write(w io.Writer, reqs []Request) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range reqs {
		if err := enc.Encode(&reqs[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
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
