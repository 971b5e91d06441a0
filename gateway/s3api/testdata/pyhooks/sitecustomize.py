"""Loaded by every Python process started with this directory on PYTHONPATH
(the aws cli in awscli_s3.sh, s3cmd in TestS3CLI): maps BUCKET.localhost to
127.0.0.1, which glibc here does not, so virtual-hosted requests reach the
test server with their Host header and signature unchanged."""

import socket

_getaddrinfo = socket.getaddrinfo


def _loopback_localhost(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith(".localhost"):
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_localhost
