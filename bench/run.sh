#!/usr/bin/env bash
# Runs every benchmark binary of a build (BUILD_DIR/bench/bench_*) one after the other
# and prints their output; benchmarks print figures and never fail on a time.
# Usage: bench/run.sh [BUILD_DIR] [options passed to every benchmark, e.g. --device cpu]
set -uo pipefail
BUILD_DIR=${1:-build}
shift || true
shopt -s nullglob
bins=("$BUILD_DIR"/bench/bench_*)
found=0 failed=0
for b in "${bins[@]}"; do
  [ -f "$b" ] && [ -x "$b" ] || continue
  found=$((found + 1))
  echo "=== $(basename "$b") $*"
  "$b" "$@" || { echo "=== $(basename "$b") exited with status $?"; failed=$((failed + 1)); }
  echo
done
if [ "$found" -eq 0 ]; then
  echo "bench/run.sh: no benchmark binaries in $BUILD_DIR/bench (build first: ./run build)" >&2
  exit 2
fi
echo "bench/run.sh: ran $found benchmarks ($failed exited with an error)"
[ "$failed" -eq 0 ]
