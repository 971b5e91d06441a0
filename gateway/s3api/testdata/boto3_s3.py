"""boto3 against ctxtier's S3 endpoint, default settings except where named.

Run by boto3_test.go with:
  VHOST_ENDPOINT  http://localhost:PORT  (server configured with domain "localhost")
  TLS_ENDPOINT    https://127.0.0.1:PORT (same server behind TLS)
  CA_BUNDLE       the TLS server's certificate (PEM)
  ACCESS, SECRET  an access key with scope "*"
Exits non-zero with a message on the first failed check.
"""

import os
import socket
import sys
import urllib.error
import urllib.request

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

# glibc here does not resolve BUCKET.localhost; map *.localhost to loopback
# in this process only, so boto3 sends real virtual-hosted requests (the Host
# header and the signature name the bucket host) without touching /etc/hosts.
_getaddrinfo = socket.getaddrinfo


def _loopback_localhost(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith(".localhost"):
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_localhost

ACCESS, SECRET = os.environ["ACCESS"], os.environ["SECRET"]


def check(cond, msg):
    if not cond:
        print("FAIL:", msg, file=sys.stderr)
        sys.exit(1)


def code_of(fn):
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


def client(endpoint, **cfg):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=ACCESS,
        aws_secret_access_key=SECRET,
        verify=os.environ.get("CA_BUNDLE"),
        config=Config(retries={"max_attempts": 1}, **cfg),
    )


def virtual_hosted():
    c = client(os.environ["VHOST_ENDPOINT"], s3={"addressing_style": "virtual"})
    urls = []
    c.meta.events.register("before-send.s3", lambda request, **kw: urls.append(request.url))
    b = "boto-vhost"
    c.create_bucket(Bucket=b)
    key = "00000000000b0701"
    data = os.urandom(300_000)
    c.put_object(Bucket=b, Key=key, Body=data)
    check(c.get_object(Bucket=b, Key=key)["Body"].read() == data, "GET returned other bytes")
    check(c.head_object(Bucket=b, Key=key)["ContentLength"] == len(data), "HEAD size")
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=b).get("Contents", [])]
    check(keys == [key], f"listing {keys}")
    # With a custom endpoint boto3 presigns with SigV2 unless told otherwise;
    # ctxd refuses SigV2 with AWS's own answer.
    url = c.generate_presigned_url("get_object", Params={"Bucket": b, "Key": key}, ExpiresIn=300)
    check("AWSAccessKeyId=" in url, f"boto3's default presign is no longer SigV2: {url}")
    try:
        urllib.request.urlopen(url)
        check(False, "a SigV2 presigned URL was accepted")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        check(e.code == 400 and "<Code>InvalidRequest</Code>" in body and "AWS4-HMAC-SHA256" in body, f"SigV2 presign: {e.code} {body}")
    v4 = client(os.environ["VHOST_ENDPOINT"], s3={"addressing_style": "virtual"}, signature_version="s3v4")
    url = v4.generate_presigned_url("get_object", Params={"Bucket": b, "Key": key}, ExpiresIn=300)
    check(url.startswith(f"http://{b}.localhost:") and "X-Amz-Signature=" in url, f"presigned URL {url} is not virtual-hosted SigV4")
    with urllib.request.urlopen(url) as r:
        check(r.read() == data, "presigned GET returned other bytes")
    code, status = code_of(lambda: c.create_bucket(Bucket="a..b"))
    check((code, status) == ("InvalidBucketName", 400), f"create a..b: {code} {status}")
    # ListBuckets paging (the service endpoint itself: no bucket in the host).
    for n in ("boto-page-a", "boto-page-b", "boto-page-c"):
        c.create_bucket(Bucket=n)
    names, token = [], None
    while True:
        kw = {"Prefix": "boto-page-", "MaxBuckets": 2}
        if token:
            kw["ContinuationToken"] = token
        out = c.list_buckets(**kw)
        names += [x["Name"] for x in out["Buckets"]]
        token = out.get("ContinuationToken")
        if not token:
            break
    check(names == ["boto-page-a", "boto-page-b", "boto-page-c"], f"paged buckets {names}")
    c.delete_object(Bucket=b, Key=key)
    c.delete_bucket(Bucket=b)
    bucket_hosts = [u for u in urls if f"//{b}.localhost:" in u]
    check(len(bucket_hosts) >= 7, f"only {len(bucket_hosts)} virtual-hosted requests: {urls}")
    check(not any("//localhost:" in u and f"/{b}" in u for u in urls), f"a path-style request: {urls}")
    print(f"virtual-hosted: {len(bucket_hosts)} requests to {b}.localhost")


def trailing_checksums():
    # Over HTTPS boto3 sends PutObject as STREAMING-UNSIGNED-PAYLOAD-TRAILER
    # with a CRC32 trailer by default (request_checksum_calculation=when_supported).
    c = client(os.environ["TLS_ENDPOINT"])
    b = "team-a"
    data = os.urandom(2_000_003)
    c.put_object(Bucket=b, Key="00000000000b0702", Body=data)
    for alg in ("CRC32C", "SHA256", "CRC64NVME"):
        try:
            c.put_object(Bucket=b, Key="00000000000b0703", Body=data[:4096], ChecksumAlgorithm=alg)
        except botocore.exceptions.MissingDependencyException:
            # CRC64NVME needs awscrt, which the pinned set does not include.
            continue
    check(c.get_object(Bucket=b, Key="00000000000b0702")["Body"].read() == data, "GET after trailer PUT")
    # The transfer manager with default thresholds (8 MiB): a 5 MiB file is one PUT.
    path = os.path.join(os.environ["TMPDIR"], "upload.bin")
    with open(path, "wb") as f:
        f.write(data[:1_000_000] * 5)
    c.upload_file(path, b, "00000000000b0704")
    c.download_file(b, "00000000000b0704", path + ".back")
    with open(path, "rb") as f, open(path + ".back", "rb") as g:
        check(f.read() == g.read(), "download_file returned other bytes")
    print("trailing checksums: ok")


virtual_hosted()
trailing_checksums()
print("boto3", boto3.__version__, "botocore", botocore.__version__, "ok")
