"""Exceptions of the ctxtier client, one class per wire error code.

Every class derives from :class:`CtxtierError` and carries the code number of
``docs/protocol.md`` ("Error codes", the table of ``gateway/errcode``) in
``code``. :func:`from_code` maps a code read off the wire back to its class;
an unknown code is :class:`Internal`, as the protocol requires.
"""

from __future__ import annotations


class CtxtierError(Exception):
    """Base of every error the client raises for a server's answer or a broken connection."""

    code = 10  # Internal, for the base class itself
    name = "Internal"

    def __init__(self, message: str = "", *, code: int | None = None):
        if code is not None:
            self.code = code
        super().__init__(message or self.name)

    @property
    def message(self) -> str:
        return str(self)


def _define(code: int, name: str, doc: str, *bases: type) -> type:
    cls = type(name, (CtxtierError, *bases), {"code": code, "name": name, "__doc__": doc})
    return cls


NotFound = _define(1, "NotFound", "No such block (GET, DELETE, PIN).")
Conflict = _define(2, "Conflict", "PUT of an existing key with different bytes; the stored block is kept.")
ChecksumMismatch = _define(
    3, "ChecksumMismatch", "Bytes do not match their CRC-32C (a PUT the server refused, or a GET the client refused)."
)
UnknownNamespace = _define(4, "UnknownNamespace", "The frame's namespace does not exist.")
TooLarge = _define(5, "TooLarge", "A block, batch or frame over the server's limits.")
InvalidKey = _define(6, "InvalidKey", "A key the server cannot accept.")
InvalidArgument = _define(7, "InvalidArgument", "Another bad field or argument.", ValueError)
NoSpace = _define(8, "NoSpace", "The tier cannot make room.")
Unavailable = _define(
    9, "Unavailable", "The server cannot be reached, or a dependency is down; retry later or recompute.", ConnectionError
)
Internal = _define(10, "Internal", "An unexpected server failure, or a code this client does not know.")
MalformedFrame = _define(11, "MalformedFrame", "A frame that cannot be decoded (either side).")
VersionMismatch = _define(12, "VersionMismatch", "The server does not speak this client's protocol version.")
NamespaceExists = _define(13, "NamespaceExists", "(admin APIs) the namespace exists.")
NamespaceNotEmpty = _define(14, "NamespaceNotEmpty", "(admin APIs) the namespace still holds blocks.")
Unauthenticated = _define(15, "Unauthenticated", "Missing or bad credentials, or a key revoked while connected.")
PermissionDenied = _define(16, "PermissionDenied", "The namespace is outside the access key's scope.")
Canceled = _define(17, "Canceled", "The request was canceled.")
DeadlineExceeded = _define(18, "DeadlineExceeded", "The call ran out of time (a client timeout too).", TimeoutError)
Closed = _define(19, "Closed", "The server is shutting down, or the client was closed.")
QuotaExceeded = _define(
    20, "QuotaExceeded", "The block is larger than its namespace's quota in a tier, or the namespace cannot evict its own blocks."
)

#: code number -> exception class, for every code of the protocol.
BY_CODE: dict[int, type] = {
    c.code: c
    for c in (
        NotFound,
        Conflict,
        ChecksumMismatch,
        UnknownNamespace,
        TooLarge,
        InvalidKey,
        InvalidArgument,
        NoSpace,
        Unavailable,
        Internal,
        MalformedFrame,
        VersionMismatch,
        NamespaceExists,
        NamespaceNotEmpty,
        Unauthenticated,
        PermissionDenied,
        Canceled,
        DeadlineExceeded,
        Closed,
        QuotaExceeded,
    )
}


def from_code(code: int, message: str = "") -> CtxtierError:
    """Return the exception for a non-zero wire code (Internal, keeping the number, when unknown)."""
    cls = BY_CODE.get(code)
    if cls is None:
        return Internal(message or f"unknown error code {code}", code=code)
    return cls(message)


def name_of(code: int) -> str:
    """The code's stable name ("OK" for 0, "Code(N)" when unknown)."""
    if code == 0:
        return "OK"
    cls = BY_CODE.get(code)
    return cls.name if cls else f"Code({code})"


__all__ = ["CtxtierError", "BY_CODE", "from_code", "name_of"] + [c.__name__ for c in BY_CODE.values()]
