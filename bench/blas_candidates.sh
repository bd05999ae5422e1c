#!/usr/bin/env bash
# Compares the BLAS libraries the CPU backend could use (docs/cpu-performance.md):
# Debian's OpenBLAS pthreads build (libopenblas0-pthread, the one the project links and
# runs one thread per call), its OpenMP and sequential builds (libopenblas0-openmp,
# libopenblas0-serial) and BLIS's OpenMP build (libblis4-openmp), with their own
# threading, on the GEMM shapes of a training step and on a GEMM + OpenMP region loop
# (where a BLAS with its own pool fights OpenMP's). Each library present is compiled
# against bench/blas_candidates.c and run at 1 and 2 threads, interleaved (round r runs
# every library once), ROUNDS rounds; then each library's thread-safety check (3
# threads calling at once, one thread per call, as the CPU backend's pool does).
# Optional: not part of the build or tests; install a candidate with apt-get to include it.
# Usage: bench/blas_candidates.sh [ROUNDS (default 2)] [seconds per shape (default 0.3)]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
BUDGET=${2:-0.3}
LIB=/usr/lib/x86_64-linux-gnu
INC=/usr/include/x86_64-linux-gnu
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

names=()
build() {  # name include-dir lib-dir lib
  local name=$1 inc=$2 dir=$3 lib=$4
  [ -f "$dir/lib$lib.so" ] || { echo "blas_candidates: $name not installed ($dir/lib$lib.so), skipped"; return; }
  gcc -O2 -fopenmp -pthread -I"$inc" bench/blas_candidates.c -o "$TMP/$name" -L"$dir" -l"$lib" \
    -Wl,-rpath,"$dir"
  names+=("$name")
}
build openblas-pthread "$INC/openblas-pthread" "$LIB/openblas-pthread" openblas
build openblas-openmp "$INC/openblas-openmp" "$LIB/openblas-openmp" openblas
build openblas-serial "$INC/openblas-serial" "$LIB/openblas-serial" openblas
build blis-openmp "$INC/blis-openmp" "$LIB/blis-openmp" blis

echo "load: $(uptime)"
for r in $(seq 1 "$ROUNDS"); do
  for t in 1 2; do
    for n in "${names[@]}"; do
      echo "== round $r, $t thread(s), $n"
      OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t BLIS_NUM_THREADS=$t "$TMP/$n" "$n" "$BUDGET"
    done
  done
done
echo "load: $(uptime)"
for n in "${names[@]}"; do
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 "$TMP/$n" "$n" 0 safety
done
