#!/usr/bin/env bash
# Compares the BLAS libraries the CPU backend could use, on the CPU at hand
# (docs/cpu-performance.md, "Choosing the BLAS"): Debian's OpenBLAS pthreads build (the
# one the project links and runs one thread per call) with each x86-64 kernel set its
# DYNAMIC_ARCH build carries that this CPU can run (OPENBLAS_CORETYPE: Haswell, Zen,
# SkylakeX, Cooperlake; "own" = what the library picks by itself), its OpenMP and
# sequential builds, BLIS (pthreads and OpenMP builds) and oneDNN's dnnl_sgemm, each with
# its own threading, on the GEMM shapes of a training step and on a GEMM + OpenMP region
# loop (where a BLAS with its own pool fights OpenMP's). OpenBLAS's rows also time
# cblas_sbgemm (bf16 x bf16 -> f32) where the library has it. Each candidate
# present is compiled against bench/blas_candidates.c and run at 1 and 2 threads,
# interleaved (round r runs every candidate once), ROUNDS rounds; then the thread-safety
# check of each library (3 threads calling at once, one thread per call, as the CPU
# backend's pool does). The first lines name the CPU and what it supports.
# Optional: not part of the build or tests. Candidates not installed are skipped (with a
# line); to include them: apt-get install libopenblas0-openmp libopenblas0-serial
# libblis-pthread-dev libblis-openmp-dev libdnnl-dev.
# Usage: bench/blas_candidates.sh [ROUNDS (default 2)] [seconds per shape (default 0.3)]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
BUDGET=${2:-0.3}
LIB=/usr/lib/x86_64-linux-gnu
INC=/usr/include/x86_64-linux-gnu
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), family $(grep -m1 'cpu family' /proc/cpuinfo |
  sed 's/.*: //') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has=()
for f in avx2 fma avx512f avx512bw avx512dq avx512vl avx512_bf16 avx512_vnni amx_bf16 amx_tile; do
  [[ " $flags " == *" $f "* ]] && has+=("$f")
done
echo "cpu: supports ${has[*]:-none of avx2 .. amx}"

# Candidates: label, binary, environment (NAME=VALUE or -).
labels=() bins=() envs=()
add() { labels+=("$1"); bins+=("$2"); envs+=("$3"); }
build() {  # binary-name include-dir lib-dir lib [extra cflags]
  local name=$1 inc=$2 dir=$3 lib=$4 extra=${5:-}
  [ -f "$dir/lib$lib.so" ] || { echo "blas_candidates: $name not installed ($dir/lib$lib.so), skipped"; return 1; }
  # shellcheck disable=SC2086
  gcc -O2 -fopenmp -pthread -I"$inc" $extra bench/blas_candidates.c -o "$TMP/$name" -L"$dir" -l"$lib" \
    -Wl,-rpath,"$dir"
}
# cblas_sbgemm only where the library was built with it (Debian 12's 0.3.21 is not).
sb=""
nm -D "$LIB/openblas-pthread/libopenblas.so.0" 2>/dev/null | grep -q ' T cblas_sbgemm$' && sb=-DWITH_SBGEMM
if build openblas-pthread "$INC/openblas-pthread" "$LIB/openblas-pthread" openblas "$sb"; then
  add openblas:own "$TMP/openblas-pthread" -
  for core in Haswell Zen SkylakeX Cooperlake; do
    case $core in
      Haswell|Zen) [[ " ${has[*]} " == *" avx2 "* ]] || continue ;;
      SkylakeX) [[ " ${has[*]} " == *" avx512vl "* ]] || continue ;;
      Cooperlake) [[ " ${has[*]} " == *" avx512_bf16 "* ]] || continue ;;
    esac
    add "openblas:$core" "$TMP/openblas-pthread" "OPENBLAS_CORETYPE=$core"
  done
fi
build openblas-openmp "$INC/openblas-openmp" "$LIB/openblas-openmp" openblas && add openblas-openmp "$TMP/openblas-openmp" -
build openblas-serial "$INC/openblas-serial" "$LIB/openblas-serial" openblas && add openblas-serial "$TMP/openblas-serial" -
build blis-pthread "$INC/blis-pthread" "$LIB/blis-pthread" blis && add blis-pthread "$TMP/blis-pthread" -
build blis-openmp "$INC/blis-openmp" "$LIB/blis-openmp" blis && add blis-openmp "$TMP/blis-openmp" -
build onednn /usr/include "$LIB" dnnl -DUSE_DNNL && add onednn "$TMP/onednn" -

run() {  # index threads [args...]
  local i=$1 t=$2
  shift 2
  local e=()
  [ "${envs[$i]}" = - ] || e=("${envs[$i]}")
  env OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" BLIS_NUM_THREADS="$t" "${e[@]}" "${bins[$i]}" "${labels[$i]}" "$@"
}

echo "load: $(uptime)"
for r in $(seq 1 "$ROUNDS"); do
  for t in 1 2; do
    for i in "${!labels[@]}"; do
      echo "== round $r, $t thread(s), ${labels[$i]}"
      run "$i" "$t" "$BUDGET"
    done
  done
done
echo "load: $(uptime)"
declare -A checked=()
for i in "${!labels[@]}"; do
  [ -n "${checked[${bins[$i]}]:-}" ] && continue
  checked[${bins[$i]}]=1
  run "$i" 1 0 safety | tail -n 1
done
