"""AWS Signature V4 for the requests the package sends over HTTP.

ctxd's HTTP API and S3 endpoint take an access key's credentials as SigV4
(region ``us-east-1``, service ``s3`` by default), the form that never sends
the secret itself. Only what the package needs is here: requests without a
signed body (``UNSIGNED-PAYLOAD``) and without a query string.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from typing import Optional

UNSIGNED = "UNSIGNED-PAYLOAD"


def sign(method: str, host: str, path: str, access_key: str, secret: str, *, region: str = "us-east-1",
         now: Optional[datetime.datetime] = None) -> dict[str, str]:
    """Headers (Host, X-Amz-Date, X-Amz-Content-Sha256, Authorization) of a
    SigV4-signed request for path (already URI-encoded) on host."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    headers = {"host": host, "x-amz-content-sha256": UNSIGNED, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, UNSIGNED])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    return {
        "Host": host,
        "X-Amz-Date": amz_date,
        "X-Amz-Content-Sha256": UNSIGNED,
        "Authorization": f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed}, Signature={sig}",
    }
