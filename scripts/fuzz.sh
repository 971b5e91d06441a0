#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default 60s).
# Fails if any target finds a crasher (it is saved under testdata/fuzz for replay).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-60s}
status=0
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    echo "== $pkg $target ($t)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg"; then
      status=1
    fi
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sed 's|^\./||' | sort)
exit $status
