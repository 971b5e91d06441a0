package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

var testLimits = Limits{MaxBulk: 64, MaxRequest: 128, MaxDrop: 1 << 20, MaxArgs: 8}

func parseAll(raw []byte, lim Limits) ([][]string, error) {
	var pool bufPool
	r := newReader(bufio.NewReaderSize(bytes.NewReader(raw), 64), lim, &pool)
	var out [][]string
	for {
		args, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		var ss []string
		for _, a := range args {
			ss = append(ss, string(a))
		}
		out = append(out, ss)
		r.release()
	}
}

func TestReaderFrames(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    [][]string
		wantErr string
	}{
		{"array", encode("SET", "k", "v"), [][]string{{"SET", "k", "v"}}, ""},
		{"two in a row", encode("GET", "a") + encode("GET", "b"), [][]string{{"GET", "a"}, {"GET", "b"}}, ""},
		{"empty bulk", encode("SET", "k", ""), [][]string{{"SET", "k", ""}}, ""},
		{"binary bulk", "*1\r\n$4\r\n\r\n\x00\xff\r\n", [][]string{{"\r\n\x00\xff"}}, ""},
		{"inline", "PING hi  there\r\n", [][]string{{"PING", "hi", "there"}}, ""},
		{"inline LF only", "PING\n", [][]string{{"PING"}}, ""},
		{"empty array and blank line", "*0\r\n\r\n*-1\r\n" + encode("PING"), [][]string{nil, nil, nil, {"PING"}}, ""},
		{"arena grows across arguments", encode("A", strings.Repeat("x", 60), strings.Repeat("y", 60)), [][]string{{"A", strings.Repeat("x", 60), strings.Repeat("y", 60)}}, ""},
		{"argument over MaxBulk dropped, stream goes on", encode("SET", "k", strings.Repeat("x", 65)) + encode("PING"), nil, "argument of 65 bytes exceeds the limit of 64 bytes; nothing was stored"},
		{"request over MaxRequest", encode("MSET", strings.Repeat("x", 60), strings.Repeat("y", 60), strings.Repeat("z", 60)), nil, "request of 184 bytes exceeds the limit of 128 bytes; nothing was stored"},
		{"too many arguments", "*9\r\n", nil, "Protocol error: invalid multibulk length"},
		{"bulk over MaxDrop", "*1\r\n$1048577\r\n", nil, "Protocol error: invalid bulk length"},
		{"4 GiB bulk", "*1\r\n$4294967296\r\n", nil, "Protocol error: invalid bulk length"},
		{"negative bulk", "*1\r\n$-1\r\n", nil, "Protocol error: invalid bulk length"},
		{"plus sign", "*1\r\n$+1\r\nx\r\n", nil, "Protocol error: invalid bulk length"},
		{"missing CRLF after bulk", "*1\r\n$1\r\nxy\r\n", nil, "Protocol error: bulk string not terminated by CRLF"},
		{"truncated bulk", "*1\r\n$10\r\nabc", nil, "unexpected EOF"},
		{"truncated array", "*3\r\n$3\r\nSET\r\n", nil, "unexpected EOF"},
		{"header too long for the buffer", "*1\r\n$" + strings.Repeat("1", 100) + "\r\n", nil, "Protocol error: header line too long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAll([]byte(tc.raw), testLimits)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("got %q want %q", got, tc.want)
			}
		})
	}
	// A dropped request leaves the stream in sync: the next one parses.
	var pool bufPool
	r := newReader(bufio.NewReaderSize(strings.NewReader(encode("SET", "k", strings.Repeat("x", 500))+encode("PING")), 64), testLimits, &pool)
	var tl *tooLargeError
	if _, err := r.next(); !errors.As(err, &tl) {
		t.Fatalf("first: %v", err)
	}
	if args, err := r.next(); err != nil || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("after a dropped request: %q %v", args, err)
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"a*", "abc", true},
		{"a*", "bac", false},
		{"*c", "abc", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[ab]x", "bx", true},
		{"[^ab]x", "bx", false},
		{"[^ab]x", "cx", true},
		{"[a-c]", "b", true},
		{"[c-a]", "b", true},
		{"[a-c]", "d", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"[", "[", true},
		{"*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 5000), false},
		{"chunk:*:kv_bytes", "chunk:12:kv_bytes", true},
		{"chunk:*:kv_bytes", "chunk:12:metadata", false},
	}
	for _, tc := range cases {
		if got := globMatch([]byte(tc.p), []byte(tc.s)); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

func TestSubrange(t *testing.T) {
	cases := []struct {
		start, end int64
		want       string
	}{
		{0, 3, "0123"}, {-3, -1, "789"}, {0, -1, "0123456789"}, {5, 2, ""}, {-100, 2, "012"}, {8, 100, "89"}, {10, 20, ""}, {-1, -5, ""},
	}
	for _, tc := range cases {
		if got := string(subrange([]byte("0123456789"), tc.start, tc.end)); got != tc.want {
			t.Errorf("subrange(%d, %d) = %q, want %q", tc.start, tc.end, got, tc.want)
		}
	}
}

// FuzzReader checks the parser's invariants on arbitrary bytes: no panic;
// every request it returns respects the limits; re-encoding the requests
// and parsing them again gives the same requests; and every failure is one
// of the three kinds the connection knows how to answer.
func FuzzReader(f *testing.F) {
	f.Add([]byte(encode("SET", "k", "v") + encode("GET", "k")))
	f.Add([]byte("PING\r\n*1\r\n$4\r\nPING\r\n"))
	f.Add([]byte("*1\r\n$4294967296\r\n"))
	f.Add([]byte("*-1\r\n*0\r\n*2\r\n$-1\r\n"))
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$100\r\nabc"))
	f.Add([]byte(encode("SET", "k", strings.Repeat("x", 70)) + "PING\r\n"))
	f.Add([]byte("\x00\xff*\r\n$\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		reqs, err := parseAll(raw, testLimits)
		var tl *tooLargeError
		if err != nil && !errors.Is(err, errProtocol) && !errors.As(err, &tl) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error kind %T: %v", err, err)
		}
		var again bytes.Buffer
		for _, req := range reqs {
			if len(req) > testLimits.MaxArgs {
				t.Fatalf("%d arguments past MaxArgs", len(req))
			}
			total := 0
			for _, a := range req {
				if int64(len(a)) > testLimits.MaxBulk {
					t.Fatalf("argument of %d bytes past MaxBulk", len(a))
				}
				total += len(a)
			}
			if int64(total) > testLimits.MaxRequest {
				t.Fatalf("request of %d bytes past MaxRequest", total)
			}
			fmt.Fprintf(&again, "*%d\r\n", len(req))
			for _, a := range req {
				fmt.Fprintf(&again, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		back, err := parseAll(again.Bytes(), Limits{MaxBulk: 1 << 20, MaxRequest: 1 << 20, MaxDrop: 1 << 20, MaxArgs: 1 << 10})
		if err != nil {
			t.Fatalf("re-encoded requests do not parse: %v", err)
		}
		if len(back) != len(reqs) {
			t.Fatalf("%d requests re-parsed as %d", len(reqs), len(back))
		}
		for i := range reqs {
			if !slices.Equal(back[i], reqs[i]) && !(len(reqs[i]) == 0 && len(back[i]) == 0) {
				t.Fatalf("request %d: %q re-parsed as %q", i, reqs[i], back[i])
			}
		}
	})
}

// TestLookupCommand checks the command lookup, its GET/SET shortcut
// included: any case finds the command, near misses find nothing.
func TestLookupCommand(t *testing.T) {
	cases := []struct {
		name string
		want string // "" for no command
	}{
		{"GET", "get"}, {"get", "get"}, {"gEt", "get"}, {"SET", "set"}, {"sEt", "set"},
		{"GETRANGE", "getrange"}, {"mget", "mget"}, {"PING", "ping"}, {"setex", ""},
		{"GE", ""}, {"GETT", ""}, {"gat", ""}, {"'et", ""}, {"G\x05T", ""}, {"\x07et", ""},
		{"ZET", ""}, {"", ""}, {strings.Repeat("a", 17), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := lookupCommand([]byte(tc.name))
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("%q found %q", tc.name, got.name)
			case tc.want != "" && (got == nil || got.name != tc.want):
				t.Fatalf("%q found %v, want %q", tc.name, got, tc.want)
			}
		})
	}
}
