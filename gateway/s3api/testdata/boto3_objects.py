"""boto3 against an object namespace (a bucket made through S3), default
settings: virtual-hosted addressing, the transfer manager's default
thresholds (multipart at 8 MiB), default checksums.

Run by objects_test.go with:
  VHOST_ENDPOINT  http://localhost:PORT  (server configured with domain "localhost")
  ACCESS, SECRET  an access key with scope "*"
  TMPDIR          scratch directory
  BIG_MIB         size of the transfer-manager file (200 in the tests)
Exits non-zero with a message on the first failed check.
"""

import concurrent.futures
import hashlib
import os
import socket
import sys
import threading
import time
import urllib.request
from email.utils import formatdate

import boto3
import botocore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

_getaddrinfo = socket.getaddrinfo


def _loopback_localhost(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith(".localhost"):
        host = "127.0.0.1"
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_localhost

ACCESS, SECRET = os.environ["ACCESS"], os.environ["SECRET"]
TMP = os.environ["TMPDIR"]


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


def client(**cfg):
    # Virtual-hosted addressing is what boto3 does by default against AWS;
    # with a custom endpoint it has to be named.
    return boto3.client(
        "s3",
        endpoint_url=os.environ["VHOST_ENDPOINT"],
        region_name="us-east-1",
        aws_access_key_id=ACCESS,
        aws_secret_access_key=SECRET,
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "virtual"}, **cfg),
    )


c = client()
B = "objects"
c.create_bucket(Bucket=B)


def keys(prefix="", delimiter=None):
    kw = {"Bucket": B, "Prefix": prefix}
    if delimiter:
        kw["Delimiter"] = delimiter
    out, pfx = [], []
    for page in c.get_paginator("list_objects_v2").paginate(**kw, PaginationConfig={"PageSize": 2}):
        out += [o["Key"] for o in page.get("Contents", [])]
        pfx += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return out, pfx


def md5(b):
    return hashlib.md5(b).hexdigest()


def single_part():
    # LMCache-style and other engines' keys, a zero-byte object, metadata.
    names = ["model@1@0@0a1b2c3d@bfloat16", "rank0/ab/cd.bin", "with space/ü€.bin", "x.meta", "a+b=c&d"]
    for i, k in enumerate(names):
        body = b"" if k.endswith(".meta") else os.urandom(1000 + i)
        r = c.put_object(Bucket=B, Key=k, Body=body, ContentType="application/x-kv", Metadata={"layer": str(i)})
        check(r["ETag"] == f'"{md5(body)}"', f"{k}: ETag {r['ETag']} is not the MD5")
        g = c.get_object(Bucket=B, Key=k)
        check(g["Body"].read() == body, f"{k}: GET returned other bytes")
        check(g["ContentType"] == "application/x-kv" and g["Metadata"] == {"layer": str(i)}, f"{k}: metadata {g['ContentType']} {g['Metadata']}")
        check(g["ContentLength"] == len(body), f"{k}: length")
    got, _ = keys()
    check(got == sorted(names), f"listing {got}")
    got, pfx = keys(delimiter="/")
    check(pfx == ["rank0/", "with space/"] and "model@1@0@0a1b2c3d@bfloat16" in got, f"delimiter listing {got} {pfx}")
    # PUT replaces; HEAD with Range; response-content-* overrides; conditions.
    k = names[0]
    new = os.urandom(5000)
    c.put_object(Bucket=B, Key=k, Body=new)
    check(c.get_object(Bucket=B, Key=k)["Body"].read() == new, "replacing PUT")
    h = c.head_object(Bucket=B, Key=k, Range="bytes=10-19")
    check(h["ContentLength"] == 10 and h["ResponseMetadata"]["HTTPStatusCode"] == 206, f"HEAD range {h['ContentLength']}")
    g = c.get_object(Bucket=B, Key=k, Range="bytes=-100", ResponseContentType="text/x-override", ResponseContentDisposition="attachment")
    check(g["Body"].read() == new[-100:] and g["ContentType"] == "text/x-override" and g["ContentDisposition"] == "attachment", "GET range with overrides")
    etag = c.head_object(Bucket=B, Key=k)["ETag"]
    check(code_of(lambda: c.get_object(Bucket=B, Key=k, IfNoneMatch=etag))[1] == 304, "If-None-Match GET")
    check(code_of(lambda: c.get_object(Bucket=B, Key=k, IfMatch='"00"'))[0] == "PreconditionFailed", "If-Match GET")
    future = formatdate(time.time() + 3600, usegmt=True)
    past = formatdate(time.time() - 3600, usegmt=True)
    check(code_of(lambda: c.head_object(Bucket=B, Key=k, IfModifiedSince=future))[1] == 304, "If-Modified-Since HEAD")
    check(code_of(lambda: c.get_object(Bucket=B, Key=k, IfUnmodifiedSince=past))[0] == "PreconditionFailed", "If-Unmodified-Since GET")
    check(code_of(lambda: c.put_object(Bucket=B, Key=k, Body=b"x", IfMatch='"00"'))[0] == "PreconditionFailed", "If-Match PUT")
    c.put_object(Bucket=B, Key=k, Body=b"y", IfMatch=etag)
    # CopyObject, with and without a metadata replacement.
    c.copy_object(Bucket=B, Key="copy", CopySource={"Bucket": B, "Key": names[1]})
    check(c.get_object(Bucket=B, Key="copy")["Metadata"] == {"layer": "1"}, "CopyObject keeps metadata")
    c.copy_object(Bucket=B, Key="copy", CopySource={"Bucket": B, "Key": names[1]}, MetadataDirective="REPLACE", Metadata={"n": "2"})
    check(c.head_object(Bucket=B, Key="copy")["Metadata"] == {"n": "2"}, "CopyObject REPLACE")
    # Bad input: AWS's errors, nothing left behind.
    for bad in ("a/../b", "..", "bad\x00nul"):
        code, st = code_of(lambda: c.put_object(Bucket=B, Key=bad, Body=b"x"))
        check((code, st) == ("InvalidArgument", 400), f"key {bad!r}: {code} {st}")
    code, _ = code_of(lambda: c.put_object(Bucket=B, Key="meta", Body=b"x", Metadata={"big": "v" * 3000}))
    check(code == "MetadataTooLarge", f"oversized metadata: {code}")
    code, _ = code_of(lambda: c.put_object(Bucket=B, Key="k" * 1025, Body=b"x"))
    check(code == "KeyTooLongError", f"1025-byte key: {code}")
    for k in names + ["copy"]:
        c.delete_object(Bucket=B, Key=k)
    check(keys() == ([], []), f"left after deletes: {keys()}")
    print("single-part objects: ok")


def kvbm_locks():
    # Dynamo KVBM's G4 pattern: {hash}.lock taken with If-None-Match: *,
    # empty .meta objects. Two writers race for each lock: exactly one wins.
    for round_ in range(10):
        lock = f"{round_:016x}.lock"
        barrier = threading.Barrier(2)

        def take(i):
            barrier.wait()
            return code_of(lambda: c.put_object(Bucket=B, Key=lock, Body=f"writer{i}".encode(), IfNoneMatch="*"))

        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            results = sorted(r[1] for r in ex.map(take, range(2)))
        check(results == [200, 412], f"lock race {round_}: {results}")
        c.put_object(Bucket=B, Key=f"{round_:016x}.meta", Body=b"")
        check(c.head_object(Bucket=B, Key=f"{round_:016x}.meta")["ContentLength"] == 0, "empty meta")
    code, st = code_of(lambda: c.put_object(Bucket=B, Key=f"{0:016x}.lock", Body=b"again", IfNoneMatch="*"))
    check((code, st) == ("PreconditionFailed", 412), f"retake: {code} {st}")
    got, _ = keys()
    check(len(got) == 20, f"{len(got)} lock/meta objects")
    for k in got:
        c.delete_object(Bucket=B, Key=k)
    print("KVBM lock/meta objects: ok (10 races, one winner each)")


def multipart_errors():
    k = "mp/errors"
    up = c.create_multipart_upload(Bucket=B, Key=k)["UploadId"]
    p1 = os.urandom(5 << 20)
    p2 = os.urandom(1 << 20)
    e1 = c.upload_part(Bucket=B, Key=k, UploadId=up, PartNumber=1, Body=p1)["ETag"]
    e2 = c.upload_part(Bucket=B, Key=k, UploadId=up, PartNumber=2, Body=p2)["ETag"]
    e3 = c.upload_part(Bucket=B, Key=k, UploadId=up, PartNumber=3, Body=b"tail")["ETag"]
    parts = c.list_parts(Bucket=B, Key=k, UploadId=up)["Parts"]
    check([(p["PartNumber"], p["Size"]) for p in parts] == [(1, 5 << 20), (2, 1 << 20), (3, 4)], f"ListParts {parts}")
    ups = c.list_multipart_uploads(Bucket=B).get("Uploads", [])
    check([(u["Key"], u["UploadId"]) for u in ups] == [(k, up)], f"ListMultipartUploads {ups}")

    def complete(parts):
        return code_of(lambda: c.complete_multipart_upload(Bucket=B, Key=k, UploadId=up, MultipartUpload={"Parts": parts}))

    P = lambda n, e: {"PartNumber": n, "ETag": e}
    check(complete([P(2, e2), P(1, e1)])[0] == "InvalidPartOrder", "wrong order")
    check(complete([P(1, e1), P(4, e2)])[0] == "InvalidPart", "missing part")
    check(complete([P(1, e2), P(2, e2)])[0] == "InvalidPart", "ETag mismatch")
    check(complete([P(1, e1), P(2, e2), P(3, e3)])[0] == "EntityTooSmall", "small middle part")
    check(code_of(lambda: c.upload_part(Bucket=B, Key=k, UploadId=up, PartNumber=10001, Body=b"x"))[0] == "InvalidArgument", "part 10001")
    check(complete([P(n, e1) for n in range(1, 10002)])[0] == "InvalidArgument", "10,001 parts")
    check(code_of(lambda: c.upload_part(Bucket=B, Key=k, UploadId="0123456789abcdef", PartNumber=1, Body=b"x"))[0] == "NoSuchUpload", "unknown upload")
    # UploadPartCopy from an object, then complete without part 2.
    c.put_object(Bucket=B, Key="src", Body=p1)
    c.upload_part_copy(Bucket=B, Key=k, UploadId=up, PartNumber=2, CopySource={"Bucket": B, "Key": "src"}, CopySourceRange="bytes=0-5242879")
    r = c.complete_multipart_upload(Bucket=B, Key=k, UploadId=up, MultipartUpload={"Parts": [P(1, e1), P(2, f'"{md5(p1)}"'), P(3, e3)]})
    want = hashlib.md5(bytes.fromhex(md5(p1)) * 2 + bytes.fromhex(md5(b"tail"))).hexdigest() + "-3"
    check(r["ETag"] == f'"{want}"', f"multipart ETag {r['ETag']}, want {want}")
    check(c.get_object(Bucket=B, Key=k)["Body"].read() == p1 + p1 + b"tail", "assembled bytes")
    check(c.list_multipart_uploads(Bucket=B).get("Uploads", []) == [], "upload still listed")
    # If-None-Match: * on Complete.
    up2 = c.create_multipart_upload(Bucket=B, Key=k)["UploadId"]
    e = c.upload_part(Bucket=B, Key=k, UploadId=up2, PartNumber=1, Body=b"z")["ETag"]
    code, st = code_of(lambda: c.complete_multipart_upload(Bucket=B, Key=k, UploadId=up2, MultipartUpload={"Parts": [P(1, e)]}, IfNoneMatch="*"))
    check((code, st) == ("PreconditionFailed", 412), f"Complete If-None-Match: {code} {st}")
    c.abort_multipart_upload(Bucket=B, Key=k, UploadId=up2)
    check(code_of(lambda: c.list_parts(Bucket=B, Key=k, UploadId=up2))[0] == "NoSuchUpload", "aborted upload still there")
    for x in (k, "src"):
        c.delete_object(Bucket=B, Key=x)
    print("multipart errors, UploadPartCopy, conditional Complete: ok")


def transfer_manager():
    # upload_file / download_file with the default TransferConfig: 8 MiB
    # threshold and parts, 10 threads.
    n = int(os.environ.get("BIG_MIB", "200")) << 20
    path = os.path.join(TMP, "big.bin")
    h = hashlib.md5()
    with open(path, "wb") as f:
        for i in range(n >> 20):
            b = os.urandom(1 << 20)
            h.update(b)
            f.write(b)
    cfg = TransferConfig()
    check(cfg.multipart_threshold == 8 << 20, f"default threshold {cfg.multipart_threshold}")
    t = time.time()
    c.upload_file(path, B, "big/file.bin")
    up = time.time() - t
    head = c.head_object(Bucket=B, Key="big/file.bin")
    parts = (n + (8 << 20) - 1) // (8 << 20)
    check(head["ContentLength"] == n and head["ETag"].endswith(f'-{parts}"'), f"HEAD {head['ContentLength']} {head['ETag']}")
    t = time.time()
    c.download_file(B, "big/file.bin", path + ".back")
    down = time.time() - t
    g = hashlib.md5()
    with open(path + ".back", "rb") as f:
        while chunk := f.read(1 << 20):
            g.update(chunk)
    check(g.hexdigest() == h.hexdigest(), "download_file returned other bytes")
    c.delete_object(Bucket=B, Key="big/file.bin")
    print(f"transfer manager {n >> 20} MiB: upload {n / up / 2**20:.0f} MiB/s ({parts} parts), download {n / down / 2**20:.0f} MiB/s: ok")


def presign():
    v4 = client(signature_version="s3v4")
    c.put_object(Bucket=B, Key="p/q r", Body=b"presigned")
    url = v4.generate_presigned_url("get_object", Params={"Bucket": B, "Key": "p/q r"}, ExpiresIn=300)
    with urllib.request.urlopen(url) as r:
        check(r.read() == b"presigned", "presigned GET")
    c.delete_object(Bucket=B, Key="p/q r")
    print("SigV4 presigned GET: ok")


single_part()
kvbm_locks()
multipart_errors()
presign()
transfer_manager()
c.delete_bucket(Bucket=B)
print("boto3", boto3.__version__, "botocore", botocore.__version__, "objects ok")
