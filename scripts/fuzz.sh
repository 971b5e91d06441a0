#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each (default 60s).
# Fails if any target finds a crasher (it is saved under testdata/fuzz for replay).
#
# Go's fuzz coordinator has a shutdown race (golang/go#75804, fixed in Go 1.27,
# not in 1.26): when a wall-clock -fuzztime ends while a worker is mid-call, the
# target fails with a bare "context deadline exceeded" and writes no input. A
# target that fails that way, with no new file under testdata/fuzz/<target>/, is
# run again (up to 3 tries); any other failure, a new crasher file, or the race
# on every try fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-60s}
tries=3
status=0
flakes=0
corpus_count() {
  if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi
}
while IFS= read -r file; do
  dir=$(dirname "$file")
  pkg=./$dir
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    corpus="$dir/testdata/fuzz/$target"
    for try in $(seq 1 "$tries"); do
      echo "== $pkg $target ($t) try $try"
      before=$(corpus_count "$corpus")
      log=$(mktemp)
      rc=0
      go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" 2>&1 | tee "$log" || rc=$?
      after=$(corpus_count "$corpus")
      race=0
      if [ "$rc" -ne 0 ] && [ "$after" -eq "$before" ] &&
        grep -q -- "^--- FAIL: $target " "$log" &&
        [ "$(grep -A1 -- "^--- FAIL: $target " "$log" | tail -1 | sed 's/^ *//')" = "context deadline exceeded" ]; then
        race=1
      fi
      rm -f "$log"
      if [ "$rc" -eq 0 ]; then
        break
      fi
      if [ "$race" -eq 1 ] && [ "$try" -lt "$tries" ]; then
        echo "== $pkg $target: Go fuzz deadline race (golang/go#75804), no input written; running it again"
        flakes=$((flakes + 1))
        continue
      fi
      echo "== $pkg $target: FAILED"
      status=1
      break
    done
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sed 's|^\./||' | sort)
echo "fuzz: deadline races rerun: $flakes"
exit $status
