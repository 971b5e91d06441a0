package resp

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// redisVersion is the Redis version whose commands this server answers like
// (what HELLO and INFO report, so clients pick the matching behaviour).
const redisVersion = "7.4.0"

var infoSections = []string{"server", "clients", "memory", "stats", "keyspace"}

func cmdInfo(c *conn, args [][]byte) errcode.Code {
	c.publishStats() // this connection's own commands so far count
	want := map[string]bool{}
	for _, a := range args[1:] {
		sec := strings.ToLower(string(a))
		switch sec {
		case "all", "everything", "default":
			for _, s := range infoSections {
				want[s] = true
			}
		default:
			want[sec] = true
		}
	}
	if len(want) == 0 {
		for _, s := range infoSections {
			want[s] = true
		}
	}
	s := c.s
	var b bytes.Buffer
	section := func(name string, lines ...string) {
		if !want[name] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s%s\r\n", strings.ToUpper(name[:1]), name[1:])
		for _, l := range lines {
			b.WriteString(l)
			b.WriteString("\r\n")
		}
	}
	port := ""
	if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
		port = fmt.Sprint(a.Port)
	}
	section("server",
		"redis_version:"+redisVersion,
		"ctxtier_surface:resp",
		"redis_mode:standalone",
		"os:"+runtime.GOOS,
		"arch_bits:64",
		fmt.Sprintf("process_id:%d", os.Getpid()),
		"tcp_port:"+port,
		fmt.Sprintf("uptime_in_seconds:%d", int64(time.Since(s.started).Seconds())),
		fmt.Sprintf("databases:%d", len(s.cfg.Databases)))
	section("clients",
		fmt.Sprintf("connected_clients:%d", s.Conns()),
		fmt.Sprintf("maxclients:%d", s.cfg.MaxConns))
	if want["memory"] {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		// Values live in the tiers' arena and files, not on the Go heap;
		// these are the process's own figures.
		section("memory",
			fmt.Sprintf("used_memory:%d", ms.HeapAlloc),
			fmt.Sprintf("ctxtier_go_sys_bytes:%d", ms.Sys),
			"maxmemory_policy:noeviction-per-namespace-tiers")
	}
	section("stats",
		fmt.Sprintf("total_connections_received:%d", s.stats.connsTotal.Load()),
		fmt.Sprintf("total_commands_processed:%d", s.stats.commands.Load()),
		fmt.Sprintf("keyspace_hits:%d", s.stats.hits.Load()),
		fmt.Sprintf("keyspace_misses:%d", s.stats.misses.Load()),
		fmt.Sprintf("rejected_connections:%d", s.stats.rejected.Load()))
	if want["keyspace"] {
		var lines []string
		for i, ns := range s.cfg.Databases {
			if s.keys != nil {
				if cred, err := s.keys.Lookup(c.keyID); err != nil || !cred.Allows(ns) {
					continue
				}
			}
			// The namespace's blocks, listed a page at a time without
			// reading them: records not yet dropped (expired ones included).
			n, err := countBlocks(s, ns)
			if err != nil || n == 0 {
				continue
			}
			lines = append(lines, fmt.Sprintf("db%d:keys=%d,expires=0,avg_ttl=0,namespace=%s", i, n, ns))
		}
		section("keyspace", lines...)
	}
	c.writer().bulk(b.Bytes())
	return errcode.OK
}

// countBlocks counts a namespace's keys without reading them: its whole
// blocks, listing 4096 at a time, counting the two slots of one pair (a
// key's record and, during a replace, its next one: ctxstore/object) once.
func countBlocks(s *Server, ns string) (int, error) {
	const page = 4096
	n, after := 0, ""
	lastPair, counted := uint64(0), false
	for {
		infos, err := s.objects.Blocks().List(s.base, ns, "", after, page, ctxstore.ReadOptions{Level: readLevel})
		if err != nil {
			return n, err
		}
		for _, in := range infos {
			if in.Key.HasPart || (counted && in.Key.Hash>>1 == lastPair) {
				continue
			}
			n++
			lastPair, counted = in.Key.Hash>>1, true
		}
		if len(infos) < page {
			return n, nil
		}
		after = infos[len(infos)-1].Key.ObjectName()
	}
}

// sortedCommands is the command table in name order.
func sortedCommands() []*command {
	out := make([]*command, 0, len(commandTable))
	for _, cmd := range commandTable {
		out = append(out, cmd)
	}
	slices.SortFunc(out, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return out
}

// writeCommandInfo writes one COMMAND entry in Redis 7's shape: name,
// arity, flags, first key, last key, step, ACL categories, tips, key
// specifications, subcommands.
func writeCommandInfo(w *writer, cmd *command) {
	w.array(10)
	w.bulkString(cmd.name)
	w.int(int64(cmd.arity))
	w.array(len(cmd.flags))
	for _, f := range cmd.flags {
		w.simple(f)
	}
	w.int(int64(cmd.first))
	w.int(int64(cmd.last))
	w.int(int64(cmd.step))
	w.array(1)
	w.simple("@" + cmd.group)
	w.array(0)
	w.array(0)
	w.array(0)
}

func cmdCommand(c *conn, args [][]byte) errcode.Code {
	w := c.writer()
	if len(args) == 1 {
		cmds := sortedCommands()
		w.array(len(cmds))
		for _, cmd := range cmds {
			writeCommandInfo(w, cmd)
		}
		return errcode.OK
	}
	sub := args[1]
	switch {
	case isWord(sub, "COUNT"):
		w.int(int64(len(commandTable)))
	case isWord(sub, "LIST"):
		cmds := sortedCommands()
		w.array(len(cmds))
		for _, cmd := range cmds {
			w.bulkString(cmd.name)
		}
	case isWord(sub, "INFO"):
		names := args[2:]
		if len(names) == 0 {
			cmds := sortedCommands()
			w.array(len(cmds))
			for _, cmd := range cmds {
				writeCommandInfo(w, cmd)
			}
			return errcode.OK
		}
		w.array(len(names))
		for _, n := range names {
			if cmd := lookupCommand(n); cmd != nil {
				writeCommandInfo(w, cmd)
			} else {
				w.null()
			}
		}
	case isWord(sub, "DOCS"):
		var cmds []*command
		if len(args) == 2 {
			cmds = sortedCommands()
		}
		for _, n := range args[2:] {
			if cmd := lookupCommand(n); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		w.mapHeader(len(cmds))
		for _, cmd := range cmds {
			w.bulkString(cmd.name)
			w.mapHeader(3)
			w.bulkString("summary")
			w.bulkString(cmd.summary)
			w.bulkString("since")
			w.bulkString(cmd.since)
			w.bulkString("group")
			w.bulkString(cmd.group)
		}
	default:
		w.err("ERR", fmt.Sprintf("unknown subcommand '%s'. Try COMMAND COUNT, DOCS, INFO or LIST.", printable(sub)))
		return errcode.InvalidArgument
	}
	return errcode.OK
}

// globMatch reports whether s matches a Redis glob pattern: * (any run),
// ? (one byte), [abc], [^abc], [a-z], and \ to escape. It backtracks only
// to the last *, so its cost is at most len(p)*len(s) steps whatever the
// pattern.
func globMatch(p, s []byte) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(p) {
			if p[pi] == '*' {
				star, mark = pi, si
				pi++
				continue
			}
			if n, ok := matchOne(p[pi:], s[si]); ok {
				pi += n
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		pi, si = star+1, mark
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchOne matches the pattern element at the start of p (not a '*')
// against c: it returns the element's length and whether c matches it.
func matchOne(p []byte, c byte) (int, bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '\\':
		if len(p) > 1 {
			return 2, p[1] == c
		}
		return 1, c == '\\'
	case '[':
		end := bytes.IndexByte(p[1:], ']')
		if end < 0 {
			return 1, c == '[' // an unterminated class is a literal '['
		}
		class := p[1 : end+1]
		neg := len(class) > 0 && class[0] == '^'
		if neg {
			class = class[1:]
		}
		hit := false
		for i := 0; i < len(class); i++ {
			switch {
			case class[i] == '\\' && i+1 < len(class):
				i++
				hit = hit || class[i] == c
			case i+2 < len(class) && class[i+1] == '-':
				lo, hi := min(class[i], class[i+2]), max(class[i], class[i+2])
				hit = hit || (c >= lo && c <= hi)
				i += 2
			default:
				hit = hit || class[i] == c
			}
		}
		return end + 2, hit != neg
	}
	return 1, p[0] == c
}
