package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// command is one entry of the command table.
type command struct {
	name string
	// arity follows Redis: n > 0 exactly n arguments (the name included),
	// n < 0 at least -n.
	arity             int
	flags             []string
	first, last, step int
	group, summary    string
	since             string
	beforeAuth, keyed bool
	run               func(c *conn, args [][]byte) errcode.Code
	// idx is the command's position in commandList (its Observer's index).
	idx int
}

// commandList is the command table in definition order.
var commandList []*command

var commandTable map[string]*command

func init() {
	list := []*command{
		{name: "get", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "string", summary: "Returns the string value of a key.", since: "1.0.0", keyed: true, run: cmdGet},
		{name: "set", arity: -3, flags: []string{"write", "denyoom"}, first: 1, last: 1, step: 1, group: "string", summary: "Sets the string value of a key (NX, XX, EX, PX, EXAT, PXAT, KEEPTTL).", since: "1.0.0", keyed: true, run: cmdSet},
		{name: "mget", arity: -2, flags: []string{"readonly", "fast"}, first: 1, last: -1, step: 1, group: "string", summary: "Returns the string values of one or more keys.", since: "1.0.0", keyed: true, run: cmdMGet},
		{name: "mset", arity: -3, flags: []string{"write", "denyoom"}, first: 1, last: -1, step: 2, group: "string", summary: "Sets the string values of one or more keys (one after the other, not atomically).", since: "1.0.1", keyed: true, run: cmdMSet},
		{name: "exists", arity: -2, flags: []string{"readonly", "fast"}, first: 1, last: -1, step: 1, group: "keyspace", summary: "Counts how many of the keys exist.", since: "1.0.0", keyed: true, run: cmdExists},
		{name: "del", arity: -2, flags: []string{"write"}, first: 1, last: -1, step: 1, group: "keyspace", summary: "Deletes one or more keys.", since: "1.0.0", keyed: true, run: cmdDel},
		{name: "unlink", arity: -2, flags: []string{"write", "fast"}, first: 1, last: -1, step: 1, group: "keyspace", summary: "Deletes one or more keys (same as DEL).", since: "4.0.0", keyed: true, run: cmdDel},
		{name: "strlen", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "string", summary: "Returns the length of a string value.", since: "2.2.0", keyed: true, run: cmdStrlen},
		{name: "getrange", arity: 4, flags: []string{"readonly"}, first: 1, last: 1, step: 1, group: "string", summary: "Returns a substring of the string stored at a key.", since: "2.4.0", keyed: true, run: cmdGetRange},
		{name: "ttl", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Returns the expiration time in seconds of a key.", since: "1.0.0", keyed: true, run: cmdTTL},
		{name: "pttl", arity: 2, flags: []string{"readonly", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Returns the expiration time in milliseconds of a key.", since: "2.6.0", keyed: true, run: cmdTTL},
		{name: "expire", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Sets the expiration time of a key in seconds.", since: "1.0.0", keyed: true, run: cmdExpire},
		{name: "pexpire", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Sets the expiration time of a key in milliseconds.", since: "2.6.0", keyed: true, run: cmdExpire},
		{name: "expireat", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Sets the expiration time of a key to a Unix timestamp.", since: "1.2.0", keyed: true, run: cmdExpire},
		{name: "pexpireat", arity: -3, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", since: "2.6.0", keyed: true, run: cmdExpire},
		{name: "persist", arity: 2, flags: []string{"write", "fast"}, first: 1, last: 1, step: 1, group: "keyspace", summary: "Removes the expiration time of a key.", since: "2.2.0", keyed: true, run: cmdPersist},
		{name: "scan", arity: -2, flags: []string{"readonly"}, group: "keyspace", summary: "Iterates over the key names in the database.", since: "2.8.0", keyed: true, run: cmdScan},
		{name: "dbsize", arity: 1, flags: []string{"readonly"}, group: "server", summary: "Returns the number of keys in the database.", since: "1.0.0", keyed: true, run: cmdDBSize},
		{name: "ping", arity: -1, flags: []string{"fast"}, group: "connection", summary: "Returns the server's liveliness response.", since: "1.0.0", run: cmdPing},
		{name: "echo", arity: 2, flags: []string{"fast"}, group: "connection", summary: "Returns the given string.", since: "1.0.0", run: cmdEcho},
		{name: "hello", arity: -1, flags: []string{"noauth", "fast"}, group: "connection", summary: "Handshakes with the server (protocol 2 or 3, AUTH, SETNAME).", since: "6.0.0", beforeAuth: true, run: cmdHello},
		{name: "auth", arity: -2, flags: []string{"noauth", "fast"}, group: "connection", summary: "Authenticates the connection: AUTH <access-key-id> <secret>.", since: "1.0.0", beforeAuth: true, run: cmdAuth},
		{name: "select", arity: 2, flags: []string{"fast"}, group: "connection", summary: "Changes the selected database (a namespace the operator configured).", since: "1.0.0", run: cmdSelect},
		{name: "client", arity: -2, flags: []string{}, group: "connection", summary: "CLIENT SETNAME, GETNAME, SETINFO and ID.", since: "2.4.0", run: cmdClient},
		{name: "info", arity: -1, flags: []string{}, group: "server", summary: "Returns information about the server (server, clients, memory, stats, keyspace).", since: "1.0.0", run: cmdInfo},
		{name: "command", arity: -1, flags: []string{}, group: "server", summary: "Returns details about the commands (COUNT, DOCS, INFO, LIST).", since: "2.8.13", run: cmdCommand},
		{name: "config", arity: -2, flags: []string{}, group: "server", summary: "CONFIG GET: the few Redis parameters that have a meaning here.", since: "2.0.0", run: cmdConfig},
		{name: "quit", arity: -1, flags: []string{"noauth", "fast"}, group: "connection", summary: "Closes the connection.", since: "1.0.0", beforeAuth: true, run: func(c *conn, _ [][]byte) errcode.Code { c.writer().ok(); return errcode.OK }},
	}
	commandTable = make(map[string]*command, len(list))
	for i, cmd := range list {
		cmd.idx = i
		commandTable[cmd.name] = cmd
	}
	commandList = list
	getCommand, setCommand = commandTable["get"], commandTable["set"]
}

// getCommand and setCommand are found without the map: most requests
// are one of them (set by init).
var getCommand, setCommand *command

// lookupCommand finds a command by name, in any case, without allocating.
func lookupCommand(name []byte) *command {
	// b|0x20 is b in lower case for a letter, and equals a lower-case
	// letter only for that letter in either case.
	if len(name) == 3 && name[1]|0x20 == 'e' && name[2]|0x20 == 't' {
		switch name[0] | 0x20 {
		case 'g':
			return getCommand
		case 's':
			return setCommand
		}
	}
	var buf [16]byte
	if len(name) > len(buf) {
		return nil
	}
	for i, ch := range name {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return commandTable[string(buf[:len(name)])]
}

// exec runs one request; false means close the connection (QUIT).
func (c *conn) exec(args [][]byte, start time.Time) bool {
	s := c.s
	c.pending.commands++
	cmd := lookupCommand(args[0])
	w := c.writer()
	if cmd == nil {
		var rest []byte
		for _, a := range args[1:min(len(args), 4)] {
			rest = fmt.Appendf(rest, "'%s' ", printable(a))
		}
		w.err("ERR", fmt.Sprintf("unknown command '%s', with args beginning with: %s", printable(args[0]), rest))
		s.met.Request(Proto, "unknown", errcode.InvalidArgument, time.Since(start))
		return true
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		w.err("ERR", fmt.Sprintf("wrong number of arguments for '%s' command", cmd.name))
		s.met.Request(Proto, cmd.name, errcode.InvalidArgument, time.Since(start))
		return true
	}
	if !c.authed && !cmd.beforeAuth {
		s.met.Request(Proto, cmd.name, c.noAuth(), time.Since(start))
		return true
	}
	if cmd.keyed {
		if err := c.authorize(); err != nil {
			c.errReply(err)
			s.met.Request(Proto, cmd.name, errcode.Of(err), time.Since(start))
			return true
		}
	}
	code := cmd.run(c, args)
	c.lastEnd = time.Now()
	s.obs[cmd.idx].Request(code, c.lastEnd.Sub(start))
	return cmd.name != "quit"
}

// fail answers err and returns its code.
func (c *conn) fail(err error) errcode.Code {
	c.errReply(err)
	return errcode.Of(err)
}

// syntaxErr is Redis's reply to options it cannot parse.
func (c *conn) syntaxErr() errcode.Code {
	c.writer().err("ERR", "syntax error")
	return errcode.InvalidArgument
}

func (c *conn) notInteger() errcode.Code {
	c.writer().err("ERR", "value is not an integer or out of range")
	return errcode.InvalidArgument
}

func atoi(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

func isWord(b []byte, word string) bool { return bytes.EqualFold(b, []byte(word)) }

func cmdGet(c *conn, args [][]byte) errcode.Code {
	n, err := c.namespace()
	if err != nil {
		return c.fail(err)
	}
	v, err := c.s.objects.GetIn(c.s.base, n, args[1], readLevel)
	if errors.Is(err, block.ErrNotFound) {
		c.pending.misses++
		c.writer().null()
		return errcode.OK
	}
	if err != nil {
		return c.fail(err)
	}
	c.pending.hits++
	c.writer().bulk(v.Data)
	c.bytesOut += int64(len(v.Data))
	v.Release()
	return errcode.OK
}

// setArgs parses SET's options.
func parseSetOptions(args [][]byte, now time.Time) (object.SetOptions, bool) {
	var o object.SetOptions
	hasExp := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case isWord(a, "NX") && o.Cond == object.Always:
			o.Cond = object.IfAbsent
		case isWord(a, "XX") && o.Cond == object.Always:
			o.Cond = object.IfPresent
		case isWord(a, "KEEPTTL") && !hasExp:
			o.KeepTTL, hasExp = true, true
		case (isWord(a, "EX") || isWord(a, "PX") || isWord(a, "EXAT") || isWord(a, "PXAT")) && !hasExp && i+1 < len(args):
			n, ok := atoi(args[i+1])
			if !ok || n <= 0 || n > math.MaxInt64/1000 {
				return o, false
			}
			switch {
			case isWord(a, "EX"):
				o.Expires = now.Add(time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second)
			case isWord(a, "PX"):
				o.Expires = now.Add(time.Duration(min(n, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond)
			case isWord(a, "EXAT"):
				o.Expires = time.Unix(n, 0)
			default:
				o.Expires = time.UnixMilli(n)
			}
			hasExp = true
			i++
		default:
			return o, false
		}
	}
	return o, true
}

func cmdSet(c *conn, args [][]byte) errcode.Code {
	opts, ok := parseSetOptions(args[3:], time.Now())
	if !ok {
		return c.syntaxErr()
	}
	stored, err := c.s.objects.Set(c.s.base, c.ns, args[1], args[2], opts)
	if err != nil {
		return c.fail(err)
	}
	c.bytesIn += int64(len(args[2]))
	if !stored {
		c.writer().null()
		return errcode.OK
	}
	c.writer().ok()
	return errcode.OK
}

func cmdMGet(c *conn, args [][]byte) errcode.Code {
	n, err := c.namespace()
	if err != nil {
		return c.fail(err)
	}
	w := c.writer()
	w.array(len(args) - 1)
	for _, k := range args[1:] {
		v, err := c.s.objects.GetIn(c.s.base, n, k, readLevel)
		if err != nil {
			// Redis answers nil for what it cannot return here, since
			// an array element cannot be an error in RESP2.
			if !errors.Is(err, block.ErrNotFound) {
				c.s.log.Debug("mget item failed", "err", err)
			}
			c.pending.misses++
			w.null()
			continue
		}
		c.pending.hits++
		w.bulk(v.Data)
		c.bytesOut += int64(len(v.Data))
		v.Release()
	}
	return errcode.OK
}

func cmdMSet(c *conn, args [][]byte) errcode.Code {
	if len(args)%2 != 1 {
		c.writer().err("ERR", "wrong number of arguments for 'mset' command")
		return errcode.InvalidArgument
	}
	for i := 1; i < len(args); i += 2 {
		if _, err := c.s.objects.Set(c.s.base, c.ns, args[i], args[i+1], object.SetOptions{}); err != nil {
			return c.fail(fmt.Errorf("key %d of %d (the ones before it are set): %w", (i+1)/2, len(args)/2, err))
		}
		c.bytesIn += int64(len(args[i+1]))
	}
	c.writer().ok()
	return errcode.OK
}

func cmdExists(c *conn, args [][]byte) errcode.Code {
	var n int64
	for _, k := range args[1:] {
		ok, err := c.s.objects.Exists(c.s.base, c.ns, k, readLevel)
		if err != nil {
			return c.fail(err)
		}
		if ok {
			n++
		}
	}
	c.writer().int(n)
	return errcode.OK
}

func cmdDel(c *conn, args [][]byte) errcode.Code {
	var n int64
	for _, k := range args[1:] {
		ok, err := c.s.objects.Delete(c.s.base, c.ns, k)
		if err != nil {
			return c.fail(err)
		}
		if ok {
			n++
		}
	}
	c.writer().int(n)
	return errcode.OK
}

func cmdStrlen(c *conn, args [][]byte) errcode.Code {
	v, err := c.s.objects.Get(c.s.base, c.ns, args[1], readLevel)
	if errors.Is(err, block.ErrNotFound) {
		c.writer().int(0)
		return errcode.OK
	}
	if err != nil {
		return c.fail(err)
	}
	c.writer().int(int64(len(v.Data)))
	v.Release()
	return errcode.OK
}

func cmdGetRange(c *conn, args [][]byte) errcode.Code {
	start, ok1 := atoi(args[2])
	end, ok2 := atoi(args[3])
	if !ok1 || !ok2 {
		return c.notInteger()
	}
	v, err := c.s.objects.Get(c.s.base, c.ns, args[1], readLevel)
	if errors.Is(err, block.ErrNotFound) {
		c.writer().bulk(nil)
		return errcode.OK
	}
	if err != nil {
		return c.fail(err)
	}
	defer v.Release()
	c.writer().bulk(subrange(v.Data, start, end))
	c.bytesOut += int64(len(v.Data))
	return errcode.OK
}

// subrange applies GETRANGE's index rules: negative indices count from the
// end, both ends are inclusive and clamped to the value.
func subrange(b []byte, start, end int64) []byte {
	n := int64(len(b))
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), min(max(end, 0), n-1)
	if n == 0 || start > end {
		return nil
	}
	return b[start : end+1]
}

func cmdTTL(c *conn, args [][]byte) errcode.Code {
	v, err := c.s.objects.Get(c.s.base, c.ns, args[1], readLevel)
	if errors.Is(err, block.ErrNotFound) {
		c.writer().int(-2)
		return errcode.OK
	}
	if err != nil {
		return c.fail(err)
	}
	exp := v.Expires
	v.Release()
	if exp.IsZero() {
		c.writer().int(-1)
		return errcode.OK
	}
	ms := max(time.Until(exp).Milliseconds(), 0)
	if isWord(args[0], "TTL") {
		c.writer().int((ms + 500) / 1000)
		return errcode.OK
	}
	c.writer().int(ms)
	return errcode.OK
}

func cmdExpire(c *conn, args [][]byte) errcode.Code {
	n, ok := atoi(args[2])
	if !ok || n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
		return c.notInteger()
	}
	now := time.Now()
	var at time.Time
	switch {
	case isWord(args[0], "EXPIRE"):
		at = now.Add(time.Duration(max(min(n, math.MaxInt64/int64(time.Second)), -1)) * time.Second)
	case isWord(args[0], "PEXPIRE"):
		at = now.Add(time.Duration(max(min(n, math.MaxInt64/int64(time.Millisecond)), -1)) * time.Millisecond)
	case isWord(args[0], "EXPIREAT"):
		at = time.Unix(n, 0)
	default:
		at = time.UnixMilli(n)
	}
	if !at.After(time.Unix(0, 0)) {
		at = time.Unix(0, 1) // in the past: delete
	}
	var nx, xx, gt, lt bool
	for _, o := range args[3:] {
		switch {
		case isWord(o, "NX"):
			nx = true
		case isWord(o, "XX"):
			xx = true
		case isWord(o, "GT"):
			gt = true
		case isWord(o, "LT"):
			lt = true
		default:
			c.writer().err("ERR", fmt.Sprintf("Unsupported option %s", printable(o)))
			return errcode.InvalidArgument
		}
	}
	if (nx && (xx || gt || lt)) || (gt && lt) {
		c.writer().err("ERR", "NX and XX, GT or LT options at the same time are not compatible")
		return errcode.InvalidArgument
	}
	if nx || xx || gt || lt {
		v, err := c.s.objects.Get(c.s.base, c.ns, args[1], readLevel)
		if errors.Is(err, block.ErrNotFound) {
			c.writer().int(0)
			return errcode.OK
		}
		if err != nil {
			return c.fail(err)
		}
		cur := v.Expires
		v.Release()
		// A key without expiry counts as an infinite TTL for GT and LT.
		skip := (nx && !cur.IsZero()) || (xx && cur.IsZero()) ||
			(gt && (cur.IsZero() || !at.After(cur))) || (lt && !cur.IsZero() && !at.Before(cur))
		if skip {
			c.writer().int(0)
			return errcode.OK
		}
	}
	done, err := c.s.objects.SetExpiry(c.s.base, c.ns, args[1], at)
	if err != nil {
		return c.fail(err)
	}
	c.writer().int(boolInt(done))
	return errcode.OK
}

func cmdPersist(c *conn, args [][]byte) errcode.Code {
	v, err := c.s.objects.Get(c.s.base, c.ns, args[1], readLevel)
	if errors.Is(err, block.ErrNotFound) {
		c.writer().int(0)
		return errcode.OK
	}
	if err != nil {
		return c.fail(err)
	}
	had := !v.Expires.IsZero()
	v.Release()
	if !had {
		c.writer().int(0)
		return errcode.OK
	}
	done, err := c.s.objects.SetExpiry(c.s.base, c.ns, args[1], time.Time{})
	if err != nil {
		return c.fail(err)
	}
	c.writer().int(boolInt(done))
	return errcode.OK
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func cmdScan(c *conn, args [][]byte) errcode.Code {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.writer().err("ERR", "invalid cursor")
		return errcode.InvalidArgument
	}
	count := int64(10)
	var pattern []byte
	typeOK := true
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return c.syntaxErr()
		}
		switch {
		case isWord(args[i], "MATCH"):
			pattern = args[i+1]
		case isWord(args[i], "COUNT"):
			n, ok := atoi(args[i+1])
			if !ok {
				return c.notInteger()
			}
			if n < 1 {
				return c.syntaxErr()
			}
			count = min(n, 100000)
		case isWord(args[i], "TYPE"):
			typeOK = isWord(args[i+1], "string")
		default:
			return c.syntaxErr()
		}
	}
	var match func([]byte) bool
	if pattern != nil && !bytes.Equal(pattern, []byte("*")) {
		match = func(k []byte) bool { return globMatch(pattern, k) }
	}
	keys, next, err := c.s.objects.Scan(c.s.base, c.ns, cursor, int(count), match, readLevel)
	if err != nil {
		return c.fail(err)
	}
	if !typeOK {
		keys = nil // every key here is a string
	}
	w := c.writer()
	w.array(2)
	w.bulkString(strconv.FormatUint(next, 10))
	w.array(len(keys))
	for _, k := range keys {
		w.bulk(k)
	}
	return errcode.OK
}

func cmdDBSize(c *conn, _ [][]byte) errcode.Code {
	n, err := c.s.objects.Count(c.s.base, c.ns, readLevel)
	if err != nil {
		return c.fail(err)
	}
	c.writer().int(n)
	return errcode.OK
}

func cmdPing(c *conn, args [][]byte) errcode.Code {
	switch len(args) {
	case 1:
		c.writer().simple("PONG")
	case 2:
		c.writer().bulk(args[1])
	default:
		c.writer().err("ERR", "wrong number of arguments for 'ping' command")
		return errcode.InvalidArgument
	}
	return errcode.OK
}

func cmdEcho(c *conn, args [][]byte) errcode.Code {
	c.writer().bulk(args[1])
	return errcode.OK
}

func cmdSelect(c *conn, args [][]byte) errcode.Code {
	n, ok := atoi(args[1])
	if !ok {
		return c.notInteger()
	}
	if n < 0 || n >= int64(len(c.s.cfg.Databases)) {
		c.writer().err("ERR", "DB index is out of range")
		return errcode.InvalidArgument
	}
	prevDB, prevNS := c.db, c.ns
	c.db, c.ns = int(n), c.s.cfg.Databases[n]
	c.dropNamespace()
	if err := c.authorize(); err != nil {
		c.db, c.ns = prevDB, prevNS
		return c.fail(err)
	}
	c.writer().ok()
	return errcode.OK
}

func cmdAuth(c *conn, args [][]byte) errcode.Code {
	if len(args) > 3 {
		return c.syntaxErr()
	}
	if len(args) == 2 {
		if c.s.keys == nil {
			return c.fail(fmt.Errorf("%w: AUTH <password> called without any password configured (ctxd runs with --auth off)", block.ErrInvalidArgument))
		}
		c.writer().err("WRONGPASS", "ctxtier has no default user: use AUTH <access-key-id> <secret>")
		return errcode.Unauthenticated
	}
	if err := c.login(args[1], args[2]); err != nil {
		if errors.Is(err, errWrongPass) {
			c.writer().err("WRONGPASS", err.Error())
			return errcode.Unauthenticated
		}
		return c.fail(err)
	}
	c.writer().ok()
	return errcode.OK
}

func cmdHello(c *conn, args [][]byte) errcode.Code {
	proto := c.w.proto
	rest := args[1:]
	if len(rest) > 0 {
		v, ok := atoi(rest[0])
		if !ok {
			c.writer().err("ERR", "Protocol version is not an integer or out of range")
			return errcode.InvalidArgument
		}
		if v != 2 && v != 3 {
			c.writer().err("NOPROTO", "unsupported protocol version")
			return errcode.InvalidArgument
		}
		proto = int(v)
		rest = rest[1:]
	}
	var name []byte
	setName := false
	for len(rest) > 0 {
		switch {
		case isWord(rest[0], "AUTH") && len(rest) >= 3:
			if err := c.login(rest[1], rest[2]); err != nil {
				if errors.Is(err, errWrongPass) {
					c.writer().err("WRONGPASS", err.Error())
					return errcode.Unauthenticated
				}
				return c.fail(err)
			}
			rest = rest[3:]
		case isWord(rest[0], "SETNAME") && len(rest) >= 2:
			name, setName = rest[1], true
			rest = rest[2:]
		default:
			c.writer().err("ERR", fmt.Sprintf("Syntax error in HELLO option '%s'", printable(rest[0])))
			return errcode.InvalidArgument
		}
	}
	if !c.authed {
		return c.noAuth()
	}
	if setName {
		c.name = string(name)
	}
	c.w.proto = proto
	w := c.writer()
	w.mapHeader(7)
	w.bulkString("server")
	w.bulkString("redis")
	w.bulkString("version")
	w.bulkString(redisVersion)
	w.bulkString("proto")
	w.int(int64(proto))
	w.bulkString("id")
	w.int(c.id)
	w.bulkString("mode")
	w.bulkString("standalone")
	w.bulkString("role")
	w.bulkString("master")
	w.bulkString("modules")
	w.array(0)
	return errcode.OK
}

func cmdClient(c *conn, args [][]byte) errcode.Code {
	sub := args[1]
	switch {
	case isWord(sub, "SETNAME") && len(args) == 3:
		if bytes.ContainsAny(args[2], " \r\n") {
			c.writer().err("ERR", "Client names cannot contain spaces, newlines or special characters.")
			return errcode.InvalidArgument
		}
		c.name = string(args[2])
		c.writer().ok()
	case isWord(sub, "GETNAME") && len(args) == 2:
		if c.name == "" {
			c.writer().null()
		} else {
			c.writer().bulkString(c.name)
		}
	case isWord(sub, "SETINFO") && len(args) == 4:
		if !isWord(args[2], "LIB-NAME") && !isWord(args[2], "LIB-VER") {
			c.writer().err("ERR", fmt.Sprintf("Unrecognized option '%s'", printable(args[2])))
			return errcode.InvalidArgument
		}
		c.writer().ok()
	case isWord(sub, "ID") && len(args) == 2:
		c.writer().int(c.id)
	default:
		c.writer().err("ERR", fmt.Sprintf("unknown subcommand or wrong number of arguments for '%s'. Try SETNAME, GETNAME, SETINFO or ID.", printable(sub)))
		return errcode.InvalidArgument
	}
	return errcode.OK
}

func cmdConfig(c *conn, args [][]byte) errcode.Code {
	if !isWord(args[1], "GET") || len(args) < 3 {
		c.writer().err("ERR", "only CONFIG GET <parameter> is supported")
		return errcode.InvalidArgument
	}
	// The Redis parameters that describe this server truthfully: no
	// snapshots, no append-only file, and the databases SELECT knows.
	params := [][2]string{{"save", ""}, {"appendonly", "no"}, {"databases", strconv.Itoa(len(c.s.cfg.Databases))}}
	var out [][2]string
	for _, p := range params {
		for _, pat := range args[2:] {
			if globMatch(bytes.ToLower(pat), []byte(p[0])) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	w := c.writer()
	w.mapHeader(len(out))
	for _, p := range out {
		w.bulkString(p[0])
		w.bulkString(p[1])
	}
	return errcode.OK
}
