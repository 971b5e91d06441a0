// Package errcode is the one table that maps ctxtier's sentinel errors to
// wire error codes and HTTP statuses, and back. Servers call Of(err) to pick
// the code for a failed request; clients call Code.Err() to turn a code back
// into an error that errors.Is matches against the same sentinel.
package errcode

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Code is a wire error code. 0 is success. Codes are stable: never renumber.
type Code uint16

// The codes. Add new ones at the end; old clients map unknown codes to ErrInternal.
const (
	OK                Code = 0
	NotFound          Code = 1
	Conflict          Code = 2
	ChecksumMismatch  Code = 3
	UnknownNamespace  Code = 4
	TooLarge          Code = 5
	InvalidKey        Code = 6
	InvalidArgument   Code = 7
	NoSpace           Code = 8
	Unavailable       Code = 9
	Internal          Code = 10
	MalformedFrame    Code = 11
	VersionMismatch   Code = 12
	NamespaceExists   Code = 13
	NamespaceNotEmpty Code = 14
	Unauthenticated   Code = 15
	PermissionDenied  Code = 16
	Canceled          Code = 17
	DeadlineExceeded  Code = 18
	Closed            Code = 19
	QuotaExceeded     Code = 20
)

// Gateway-level sentinels (errors of the wire itself, not of the store).
var (
	// ErrMalformedFrame: a frame that cannot be decoded. The connection is closed after the reply.
	ErrMalformedFrame = errors.New("malformed frame")
	// ErrVersionMismatch: the handshake named a protocol version the server does not speak.
	ErrVersionMismatch = errors.New("protocol version mismatch")
	// ErrInternal: an unexpected server-side failure.
	ErrInternal = errors.New("internal error")
)

type row struct {
	code   Code
	name   string
	err    error
	status int
}

// table is the single mapping. Order matters only for Of: the first sentinel
// that errors.Is matches wins, so more specific errors come first.
var table = []row{
	{NotFound, "NotFound", block.ErrNotFound, http.StatusNotFound},
	{Conflict, "Conflict", block.ErrConflict, http.StatusConflict},
	{ChecksumMismatch, "ChecksumMismatch", block.ErrChecksum, http.StatusBadRequest},
	{UnknownNamespace, "UnknownNamespace", block.ErrUnknownNamespace, http.StatusNotFound},
	{TooLarge, "TooLarge", block.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{InvalidKey, "InvalidKey", block.ErrInvalidKey, http.StatusBadRequest},
	{InvalidArgument, "InvalidArgument", block.ErrInvalidArgument, http.StatusBadRequest},
	{NoSpace, "NoSpace", block.ErrNoSpace, http.StatusInsufficientStorage},
	{QuotaExceeded, "QuotaExceeded", block.ErrQuotaExceeded, http.StatusInsufficientStorage},
	{Unavailable, "Unavailable", block.ErrUnavailable, http.StatusServiceUnavailable},
	{MalformedFrame, "MalformedFrame", ErrMalformedFrame, http.StatusBadRequest},
	{VersionMismatch, "VersionMismatch", ErrVersionMismatch, http.StatusBadRequest},
	{NamespaceExists, "NamespaceExists", block.ErrNamespaceExists, http.StatusConflict},
	{NamespaceNotEmpty, "NamespaceNotEmpty", block.ErrNamespaceNotEmpty, http.StatusConflict},
	{Unauthenticated, "Unauthenticated", block.ErrUnauthenticated, http.StatusUnauthorized},
	{PermissionDenied, "PermissionDenied", block.ErrPermissionDenied, http.StatusForbidden},
	{Canceled, "Canceled", context.Canceled, 499},
	{DeadlineExceeded, "DeadlineExceeded", context.DeadlineExceeded, http.StatusGatewayTimeout},
	{Closed, "Closed", block.ErrClosed, http.StatusServiceUnavailable},
	{Internal, "Internal", ErrInternal, http.StatusInternalServerError},
}

var byCode = func() map[Code]row {
	m := make(map[Code]row, len(table))
	for _, r := range table {
		m[r.code] = r
	}
	return m
}()

// Of returns the code for err: OK for nil, Internal for anything unmapped.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	for _, r := range table {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return Internal
}

// HTTPStatus is the HTTP status for c.
func (c Code) HTTPStatus() int {
	if c == OK {
		return http.StatusOK
	}
	if r, ok := byCode[c]; ok {
		return r.status
	}
	return http.StatusInternalServerError
}

// String is the code's stable name, used in JSON error bodies.
func (c Code) String() string {
	if c == OK {
		return "OK"
	}
	if r, ok := byCode[c]; ok {
		return r.name
	}
	return fmt.Sprintf("Code(%d)", uint16(c))
}

// Sentinel is the sentinel error for c (nil for OK, ErrInternal when unknown).
func (c Code) Sentinel() error {
	if c == OK {
		return nil
	}
	if r, ok := byCode[c]; ok {
		return r.err
	}
	return ErrInternal
}

// Err rebuilds an error from a code and the server's message, so that
// errors.Is(err, sentinel) holds on the client side.
func (c Code) Err(msg string) error {
	s := c.Sentinel()
	if s == nil {
		return nil
	}
	if msg == "" || msg == s.Error() {
		return s
	}
	return &remoteError{sentinel: s, msg: msg}
}

// RESPPrefix is the error prefix a RESP (Redis protocol) reply carries for
// c: the codes Redis clients know by their own name get it (NOAUTH for
// missing credentials, NOPERM for a namespace outside the key's scope),
// every other code is ERR and names itself in the message.
func (c Code) RESPPrefix() string {
	switch c {
	case Unauthenticated:
		return "NOAUTH"
	case PermissionDenied:
		return "NOPERM"
	}
	return "ERR"
}

// FromName maps a code name (as in a JSON body) back to a code; Internal if unknown.
func FromName(name string) Code {
	if name == "OK" {
		return OK
	}
	for _, r := range table {
		if r.name == name {
			return r.code
		}
	}
	return Internal
}

type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }
