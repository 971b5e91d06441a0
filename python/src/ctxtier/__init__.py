"""ctxtier: the Python client of ctxtier's native block protocol.

ctxtier is the context-memory tier of an LLM inference cluster: engines put
and get immutable KV-cache blocks, keyed by (namespace, 64-bit sequence hash,
optional tensor-parallel part). :class:`Client` speaks the native binary
protocol of docs/protocol.md (version 2) with the standard library alone;
``pip install ctxtier[crc32c]`` adds a fast C CRC-32C.
"""

from . import errors, wire
from .client import Client, as_view
from .cluster import ClusterClient
from .errors import (
    ChecksumMismatch,
    Closed,
    Conflict,
    CtxtierError,
    DeadlineExceeded,
    Internal,
    InvalidArgument,
    InvalidKey,
    MalformedFrame,
    NoSpace,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnknownNamespace,
    VersionMismatch,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "ClusterClient",
    "as_view",
    "errors",
    "wire",
    "CtxtierError",
    "ChecksumMismatch",
    "Closed",
    "Conflict",
    "DeadlineExceeded",
    "Internal",
    "InvalidArgument",
    "InvalidKey",
    "MalformedFrame",
    "NoSpace",
    "QuotaExceeded",
    "NotFound",
    "PermissionDenied",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "UnknownNamespace",
    "VersionMismatch",
]
