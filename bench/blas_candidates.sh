#!/usr/bin/env bash
# Compares the BLAS libraries the CPU backend could use (see README, "CPU performance"):
# Debian's OpenBLAS pthreads build (libopenblas0-pthread), its OpenMP build
# (libopenblas0-openmp, the one the project links) and BLIS's OpenMP build
# (libblis4-openmp), on the GEMM shapes of a training step and on a GEMM + OpenMP
# region loop. Each library present is compiled against bench/blas_candidates.c and run
# at 1 and 2 threads, interleaved (round r runs every library once), ROUNDS rounds.
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
  gcc -O2 -fopenmp -I"$inc" bench/blas_candidates.c -o "$TMP/$name" -L"$dir" -l"$lib" -Wl,-rpath,"$dir"
  names+=("$name")
}
build openblas-pthread "$INC/openblas-pthread" "$LIB/openblas-pthread" openblas
build openblas-openmp "$INC/openblas-openmp" "$LIB/openblas-openmp" openblas
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
