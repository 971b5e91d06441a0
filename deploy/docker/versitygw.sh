#!/usr/bin/env bash
# versitygw.sh — print the path of a static versitygw binary, building it first
# if the cache lacks it. The build and the cache belong to scripts/versitygw.sh
# (shared with the S3-tier tests), so there is one cached binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/scripts/versitygw.sh" install >&2
"$root/scripts/versitygw.sh" path
