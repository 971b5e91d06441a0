package trace

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzRead checks that an accepted trace has lengths and hints in range and
// round-trips through Write and Read unchanged.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}`,
		`{"timestamp": 5, "input_length": 512, "output_length": 512, "hash_ids": [1, 2, 3], "session": "s1", "parent_session": "s0", "hints": {"priority": 1, "shared_prefix_blocks": 1, "resume_within_ms": 5000, "session_end": true, "ephemeral_tail_blocks": 1}}`,
		`{"hash_ids": [1], "hints": {"shared_prefix_blocks": 2}}`,
		"\n\n{}\n",
		`{"hints": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i, r := range reqs {
			if r.InputLength < 0 || r.OutputLength < 0 {
				t.Fatalf("request %d accepted with a negative length", i)
			}
			if h := r.Hints; h != nil && (h.SharedPrefixBlocks < 0 || h.SharedPrefixBlocks > len(r.HashIDs) ||
				h.EphemeralTailBlocks < 0 || h.EphemeralTailBlocks > len(r.HashIDs) || h.ResumeWithinMs < 0) {
				t.Fatalf("request %d accepted with hints out of range: %+v", i, *h)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, reqs); err != nil {
			t.Fatal(err)
		}
		back, err := Read(&buf)
		if err != nil {
			t.Fatalf("written trace does not read back: %v", err)
		}
		if len(back) != len(reqs) || (len(reqs) > 0 && !reflect.DeepEqual(normalize(back), normalize(reqs))) {
			t.Fatalf("round trip changed the trace:\n%+v\n%+v", reqs, back)
		}
	})
}

// normalize makes empty and nil hash lists compare equal (JSON writes both
// as null or []).
func normalize(rs []Request) []Request {
	out := make([]Request, len(rs))
	for i, r := range rs {
		if len(r.HashIDs) == 0 {
			r.HashIDs = nil
		}
		out[i] = r
	}
	return out
}
