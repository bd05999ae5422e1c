#!/usr/bin/env bash
# The GPU proof: every op, a training step, NCCL at several ranks and the speed against
# PyTorch, in one call of the GPU machine (docs/gpu.md, "The GPU proof"). That machine
# (the device tool: /work/.library/device/README.md) has the CUDA toolkit, cuDNN, NCCL
# and PyTorch (pip packages) but none of our Debian libraries and no MPI; it gets the
# repository and at most 64 MiB of carried files, and one command of at most 10 minutes.
#
#   bench/gpu/proof.sh build      here: build the sm_90 test and bench binaries (BUILD_DIR,
#                                 default build-gpu), pack them with the shared libraries
#                                 the GPU machine lacks and a relocatable Open MPI
#                                 (bench/gpu/pack_ompi.sh) into build-gpu/bundle/vlm-gpu.tar.xz;
#                                 prints the size, refuses above 60 MiB
#   bench/gpu/proof.sh rehearse   here: the device run below in a mount namespace with this
#                                 machine's Open MPI (components, programs, libraries), the
#                                 binaries' RPATH folders and ssh hidden, on the CPU backend
#                                 and small shapes (the CUDA tests skip): proves the bundle,
#                                 mpirun and every command line; fails on any failed or
#                                 skipped step or more than 8 files in the output folder
#   bench/gpu/proof.sh run        there, from the repository root, with build-gpu/bundle
#                                 carried; the whole command:
#     run(command="bench/gpu/proof.sh run", carry=["build-gpu/bundle"], timeout_s=600)
#
# The run: steps in priority order under one deadline (BUDGET_S, default 540 s from the
# start), each with its own timeout (its cap, cut to what is left); a step whose minimum
# no longer fits is skipped. Order: environment and missing libraries; test_gpu and the
# CUDA op conformance; test_step_cuda; NCCL at 2 and 4 ranks on the GPU(s); bench_gemm (bf16
# TFLOP/s against the 989 dense peak); bench_llm llama1b bf16 at sequence 2048; bench_step on
# CUDA (serial against overlap, a trace); the PyTorch baseline, eager then compiled; the
# kernels of one bf16 step ranked by GPU time (ncu); compute-sanitizer memcheck and
# racecheck on our kernels with the time left. Output: at most 8 files in $OUT (the
# device tool brings them back: env.txt, tests.log, nccl.log, perf.log, torch.log,
# sanitizer.log, step_trace.json, summary.txt) and a summary table printed last. Exit status 0 when every step that ran passed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
BUNDLE=$BUILD/bundle
TARBALL=$BUNDLE/vlm-gpu.tar.xz
MAX_MIB=60

# ---- what the bundle holds, in one place -------------------------------------------
# CUDA test binaries run one after the other (gtest filters in run_tests below); the
# NCCL tests run under mpirun at 2 and 4 ranks; the benchmarks of the perf steps. A name
# without a target in the tree is left out (with a note) by `build`.
GPU_TESTS=(test_gpu test_conformance test_step_cuda)
NCCL_TESTS=(test_nccl_cuda)
BENCHES=(bench_gemm bench_llm bench_step bench_attention)
# Shared libraries the GPU machine has (not carried; anything else a binary or Open MPI
# loads is): glibc, the C++ runtime (its own is newer than ours and cuDNN/NCCL need it),
# and CUDA's (the driver, the toolkit, pip's cuDNN and NCCL).
SYSTEM_LIBS='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc[a-z-]*|libnvJitLink|libcupti)\.so'

die() { echo "proof.sh: $*" >&2; exit 2; }

# ---- build (here) ------------------------------------------------------------------
cmd_build() {
  local jobs=${JOBS:-2}  # nvcc is slow and this machine's cores are shared
  if command -v ccache >/dev/null; then  # a rebuild after a fix takes minutes, not the whole build again
    export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
    export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
  fi
  # No RPATH: the bundle's programs find their libraries by LD_LIBRARY_PATH (lib_path),
  # never in the build's library folders, which the GPU machine may have too (it has
  # OpenBLAS where we do, and an RPATH is searched before LD_LIBRARY_PATH).
  mkdir -p "$BUILD" && cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_SKIP_BUILD_RPATH=ON -DCMAKE_EXE_LINKER_FLAGS="-Wl,--as-needed" >"$BUILD/configure.log" 2>&1 ||
    { tail -20 "$BUILD/configure.log"; die "cmake configure failed (log: $BUILD/configure.log)"; }
  # A bundle without cuDNN's fused attention would prove (and time) only our f32 kernels.
  if grep -q 'cuDNN attention compiled out' "$BUILD/configure.log"; then
    die "no cuDNN frontend in third_party/cudnn_frontend: run './run setup' first (it fetches it)"
  fi
  local have names=() n
  have=$(ninja -C "$BUILD" -t targets all 2>/dev/null | sed 's/:.*//')
  for n in "${GPU_TESTS[@]}" "${NCCL_TESTS[@]}" "${BENCHES[@]}"; do
    if grep -qx "$n" <<<"$have"; then names+=("$n"); else echo "proof.sh: no target $n in this tree; left out"; fi
  done
  cmake --build "$BUILD" -j "$jobs" --target "${names[@]}" || die "build failed"

  local stage=$BUILD/bundle-stage
  rm -rf "$stage" "$BUNDLE" && mkdir -p "$stage/bin" "$stage/lib" "$BUNDLE" || die "cannot make $stage"
  for n in "${names[@]}"; do
    local f
    f=$(find "$BUILD" -type f -name "$n" -perm -u+x -not -path "$stage/*" | head -1)
    [ -n "$f" ] || die "built $n but found no such program in $BUILD"
    cp "$f" "$stage/bin/"
  done
  "$ROOT/bench/gpu/pack_ompi.sh" "$stage" || die "pack_ompi.sh failed"
  # Every library the binaries and Open MPI load, but the GPU machine's own (SYSTEM_LIBS).
  local lib
  { for f in "$stage"/bin/*; do ldd "$f" | awk '/=> \// {print $3}'; done; cat "$stage/ompi/needs.txt"; } |
    sort -u | while read -r lib; do
      grep -qE "$SYSTEM_LIBS" <<<"$(basename "$lib")" || cp -L "$lib" "$stage/lib/"
    done
  rm "$stage/ompi/needs.txt"
  strip --strip-unneeded "$stage"/lib/* 2>/dev/null || true
  {
    echo "commit $(git -C "$ROOT" rev-parse HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n), CUDA architectures 90"
    echo "bin: $(ls "$stage/bin" | tr '\n' ' ')"
    echo "lib: $(ls "$stage/lib" | tr '\n' ' ')"
  } >"$stage/MANIFEST"
  tar -C "$stage" -cf - MANIFEST bin lib ompi | xz -T2 -9 >"$TARBALL" || die "packing failed"
  local bytes mib
  bytes=$(stat -c %s "$TARBALL")
  mib=$(( (bytes + 1048575) / 1048576 ))
  echo "proof.sh: $(ls "$stage/bin" | wc -l) programs, $(ls "$stage/lib" | wc -l) libraries, Open MPI" \
    "($(du -sh "$stage" | cut -f1) unpacked): $TARBALL is $mib MiB ($bytes bytes)"
  if [ "$mib" -gt "$MAX_MIB" ]; then
    rm -f "$TARBALL"
    die "the bundle is $mib MiB, over the $MAX_MIB MiB allowed (the device tool carries 64 MiB with the tree); build fewer targets"
  fi
  echo "next: bench/gpu/proof.sh rehearse (here), then on the GPU machine:"
  echo "  run(command=\"bench/gpu/proof.sh run\", carry=[\"${BUNDLE#"$ROOT"/}\"], timeout_s=600)"
}

# ---- the run (there; here under rehearse) ------------------------------------------
W=/tmp/vlm-proof           # the unpacked bundle
T0=$(date +%s)
SUMMARY=()                 # one table row per step
FAILED=0

elapsed() { echo $(( $(date +%s) - T0 )); }
row() { SUMMARY+=("$(printf '%-16s %-9s %5s  %s' "$@")"); }

# step NAME CAP MIN LOG -- COMMAND...: runs COMMAND with the timeout CAP cut to what is
# left before the deadline END, its output appended to $OUT/LOG between the markers
# ">>> NAME: ..." and "<<< NAME: ..."; skipped when less than MIN seconds are left.
step() {
  local name=$1 cap=$2 min=$3 log=$OUT/$4
  shift 5
  local left=$(( END - $(date +%s) )) t0 rc verdict=ok fig shown
  local t=$(( cap < left ? cap : left ))
  if [ "$left" -lt "$min" ]; then
    row "$name" SKIP - "needs ${min} s, ${left} s left"
    echo "[$(elapsed) s] $name: skipped (needs $min s, $left s left)"
    [ "$MODE" = rehearse ] && FAILED=1  # a rehearsal runs every step
    return
  fi
  shown="$*"
  shown=${shown//$LIBPATH/\$LIBPATH}
  echo "[$(elapsed) s] $name (timeout ${t} s): $shown"
  echo ">>> $name: $shown (timeout ${t} s, at $(elapsed) s)" >>"$log"
  t0=$(date +%s)
  timeout -k 5 "$t" "$@" >>"$log" 2>&1
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict=TIMEOUT; elif [ $rc -ne 0 ]; then verdict="FAIL:$rc"; fi
  [ "$verdict" = ok ] || FAILED=1
  echo "<<< $name: $verdict after $(( $(date +%s) - t0 )) s" >>"$log"
  fig=$(figure "$name" "$log")
  # On the GPU machine no test may skip (a skip there means no GPU, or a missing piece).
  if [ "$MODE" = run ] && [[ $fig =~ skipped\ [1-9] ]]; then verdict=SKIPPED FAILED=1; fi
  row "$name" "$verdict" "$(( $(date +%s) - t0 ))s" "$fig"
  echo "[$(elapsed) s] $name: $verdict after $(( $(date +%s) - t0 )) s${fig:+ | $fig}"
}

# The last section of step NAME in LOG (from its ">>>" line to its "<<<" line).
section() {
  awk -v a=">>> $1: " -v b="<<< $1: " 'index($0, a) == 1 {buf = ""; on = 1} on {buf = buf $0 "\n"} index($0, b) == 1 {on = 0}
    END {printf "%s", buf}' "$2"
}

# "passed P, skipped S, failed F" of the gtest output in $1 (the last summary in it).
gtest_counts() {
  local p s f
  p=$(grep -oE '\[  PASSED  \] [0-9]+' <<<"$1" | tail -1 | grep -oE '[0-9]+$')
  s=$(grep -oE '\[  SKIPPED \] [0-9]+' <<<"$1" | tail -1 | grep -oE '[0-9]+$')
  f=$(grep -oE '[0-9]+ FAILED TESTS?' <<<"$1" | tail -1 | grep -oE '^[0-9]+')
  echo "passed ${p:-0}, skipped ${s:-0}, failed ${f:-0}"
}

# tokens/s and MFU of the last line with `tokens/s` in a section's text.
speed() { grep -E 'tokens/s' <<<"$1" | tail -1 | grep -oE '[0-9]+ tokens/s|MFU [0-9.]+%' | paste -sd' '; }

# The figure of a step for the summary, read from its section of the log.
figure() {
  local sect
  sect=$(section "$1" "$2")
  case $1 in
    env) grep -m1 '^gpu:' <<<"$sect" | cut -c6- ;;
    test_*|nccl_np*)
      local worst='worst loss [^,]*, grad norm [^,;]*(, gradient [0-9.e+-]+|; gradients off the fp32 truth at most [0-9.]+ times)'
      echo "$(gtest_counts "$sect")$({ grep -oE "(fp32|bf16) cuda overlap: $worst" <<<"$sect" ||
        grep -m1 -oE "[a-z0-9]+ cpu overlap: $worst" <<<"$sect"; } | sed 's/^/; /' | paste -sd' ')" ;;
    bench_gemm)  # the GPU's measured peak; on a CPU (rehearsal) the best bf16 row
      grep -oE 'measured bf16 peak.*' <<<"$sect" | tail -1 | grep . ||
        awk '$1 == "bf16" && $6 > m {m = $6} END {if (m) printf "best bf16 %.1f GFLOP/s\n", m}' <<<"$sect" ;;
    bench_llm*) echo "$(speed "$sect")$(
      grep -E ' attention: ' <<<"$sect" | sed -E 's/.*(forward|backward) .*: (cuDNN fused attention|our kernel).*/\1 \2/' | sort -u | paste -sd',' | sed -n '/./{s/,/, /g; s/^/; /; p}')" ;;
    torch_*) speed "$sect" ;;
    bench_step) echo "$(grep -oE 'serial / overlap: [0-9.]+' <<<"$sect" | tail -1), overlap fraction $(awk '$1 == "overlap" {print $3}' <<<"$sect" | tail -1), $(grep -oE 'overlap step / backbone alone: [0-9.]+' <<<"$sect" | tail -1)" ;;
    kernels)  # the largest kernel and the whole (a rehearsal: the step's own line)
      if grep -q '^kernels: ' <<<"$sect"; then
        echo "$(awk '$2 ~ /%$/ {n = $0; sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +/, "", n); print "top " $2 " " substr(n, 1, 48); exit}' <<<"$sect"); $(grep '^kernels: ' <<<"$sect" | tail -1 | cut -c10-)"
      else grep -E 'tokens/s' <<<"$sect" | tail -1 | grep -oE '[0-9]+ tokens/s'; fi ;;
    memcheck|racecheck)  # the tool's verdict and the tests' (a rehearsal runs the tests alone)
      echo "$(grep -oE 'ERROR SUMMARY: [0-9]+ errors?' <<<"$sect" | tail -1 || echo 'no sanitizer report'); $(gtest_counts "$sect")" ;;
  esac
}

# tokens/s of the last line with `tokens/s` in step NAME's section of LOG.
tokens_per_s() { section "$1" "$2" | grep -E 'tokens/s' | tail -1 | grep -oE '[0-9]+ tokens/s' | cut -d' ' -f1; }

# Our programs' libraries: the bundle's, then the GPU machine's CUDA (pip's nvidia
# packages, then the toolkit). Python (torch) keeps its own environment.
lib_path() {
  local p=$W/lib d
  for d in $("$PYTHON" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' 2>/dev/null); do
    [ -d "$d/nvidia" ] && p+=":$(find "$d/nvidia" -name 'lib*.so*' -printf '%h\n' | sort -u | paste -sd:)"
  done
  echo "$p:/usr/local/cuda/lib64"
}

# Open MPI relocated into the bundle (bench/gpu/pack_ompi.sh); one machine, shared memory.
ompi_env() {
  local u=$W/ompi/usr A=x86_64-linux-gnu
  export OPAL_PREFIX=$u PATH=$u/bin:$PATH
  export PMIX_INSTALL_PREFIX=$u/lib/$A/pmix2 PMIX_MCA_mca_base_component_path=$u/lib/$A/pmix2/lib/pmix
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_ess_singleton_isolated=1
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_plm=isolated OMPI_MCA_rmaps_base_oversubscribe=1
}

# The environment step: the machine, the bundle, and where every library comes from.
env_report() {
  echo "proof.sh $MODE, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -srm), $(nproc) CPUs, checkout $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
  sed 's/^/bundle: /' "$W/MANIFEST"
  if command -v nvidia-smi >/dev/null; then
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader | paste -sd';')"
  else
    echo "gpu: none (no nvidia-smi)"
  fi
  echo "mpirun: $(command -v mpirun) ($(LD_LIBRARY_PATH=$LIBPATH mpirun --version 2>&1 | head -1))"
  echo "python: $PYTHON: $("$PYTHON" -c '
import torch
try:
    cudnn = torch.backends.cudnn.version()
except RuntimeError as e:  # e.g. a cuDNN of the system found before torch'"'"'s own
    cudnn = "unusable (%s)" % str(e).split(".")[0]
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", cudnn, "gpu", torch.cuda.is_available())' 2>&1 | tail -1)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo none)"
  echo "LD_LIBRARY_PATH of our programs: $LIBPATH"
  local b
  for b in "$W"/bin/*; do
    LD_LIBRARY_PATH=$LIBPATH ldd "$b" >"$W/ldd.txt" 2>&1
    grep 'not found' "$W/ldd.txt" | awk -v b="${b##*/}" '{print "MISSING for " b ": " $1}'
    # A library that is not the machine's own must come from the bundle.
    awk '/=> \// {print $1, $3}' "$W/ldd.txt" | while read -r name path; do
      grep -qE "$SYSTEM_LIBS" <<<"$name" || [[ $path == "$W"/* ]] || echo "OUTSIDE THE BUNDLE for ${b##*/}: $name => $path"
    done
  done | sort -u
  echo "CUDA and MPI libraries (test_nccl_cuda):"
  LD_LIBRARY_PATH=$LIBPATH ldd "$W/bin/test_nccl_cuda" | grep -E 'libcud|libcublas|libnccl|libmpi\.' | sed 's/^/  /'
}

# The kernels step: one bf16 step of llama1b at 2 layers under ncu, its kernels ranked.
kernel_profile() {
  local ncu dev=cuda seq=2048 rc
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  [ "$MODE" = rehearse ] && ncu="" dev=cpu seq=128
  local bench=("$W/bin/bench_llm" --device "$dev" --precision bf16 --models llama1b --layers 2 --batch 1
    --seq "$seq" --warmup 0 --iters 1)
  if [ -z "$ncu" ]; then
    [ "$MODE" = rehearse ] || { echo "no ncu on this machine"; return 3; }
    LD_LIBRARY_PATH=$LIBPATH "${bench[@]}"
    return
  fi
  LD_LIBRARY_PATH=$LIBPATH "$ncu" --csv --clock-control none --metrics gpu__time_duration.sum --launch-count 20000 \
    "${bench[@]}" >"$W/ncu.csv" 2>&1
  rc=$?
  grep -v '^"' "$W/ncu.csv" | tail -5  # ncu's and the program's own lines
  "$PYTHON" "$ROOT/bench/gpu/kernel_table.py" --top 30 "$W/ncu.csv" || return 4
  return $rc
}

# gtest arguments of each GPU test binary (none: all of its tests).
gtest_args() {
  case $1 in
    test_conformance) echo "--gtest_filter=Ops/Conformance.Cuda/*:ConformanceTable.*" ;;
  esac
}

cmd_run() {
  MODE=${MODE:-run}
  local budget=${BUDGET_S:-540}
  END=$((T0 + budget))
  [ -f "$TARBALL" ] || die "no $TARBALL: run 'bench/gpu/proof.sh build' where the bundle is built and carry ${BUNDLE#"$ROOT"/}"
  OUT=${OUT:-/tmp/vlm-proof-out}
  mkdir -p "$OUT" || die "cannot make $OUT"
  rm -rf "$W" && mkdir -p "$W" || die "cannot make $W"
  if command -v xz >/dev/null; then
    xz -dc "$TARBALL" | tar -C "$W" -xf - || die "cannot unpack $TARBALL into $W"
  else  # no xz program: Python's lzma
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$TARBALL" "$W" ||
      die "cannot unpack $TARBALL into $W"
  fi
  PYTHON=${PYTHON:-python3}
  LIBPATH=$(lib_path)
  export VLM_SOURCE_DIR=$ROOT NCCL_DEBUG=${NCCL_DEBUG:-WARN} PYTHONUNBUFFERED=1 GTEST_COLOR=no
  export W LIBPATH PYTHON MODE ROOT SYSTEM_LIBS
  export -f env_report kernel_profile
  ompi_env
  # CUBLASLT_LOG_LEVEL=1: cuBLASLt prints why it refuses a call (an epilogue it does not
  # take falls back to our kernel silently otherwise).
  local ours=(env "LD_LIBRARY_PATH=$LIBPATH" CUBLASLT_LOG_LEVEL=1) ncpu
  ncpu=$(nproc)
  # What a rehearsal changes (the CPU backend, small shapes, no sanitizer), in one place.
  local dev=cuda llm=(--models llama1b --batch 1 --seq 2048 --warmup 1 --iters 3) gemm=(--seconds 0.3)
  local stepb=(--width 1024 --llm_layers 16 --precision bf16 --micro_batches 4 --steps 5 --warmup 2) torch_args=(--models llama1b --batch 1 --seq 2048 --warmup 2 --iters 5)
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  local memcheck=("$sanitizer" --error-exitcode 9 --print-limit 20 --tool memcheck --leak-check no)
  local racecheck=("$sanitizer" --error-exitcode 9 --print-limit 20 --tool racecheck)
  if [ "$MODE" = rehearse ]; then
    dev=cpu llm=(--models tiny --batch 1 --seq 256 --warmup 1 --iters 2) gemm=(--seconds 0.05)
    stepb=(--width 64 --llm_layers 4 --precision bf16 --micro_batches 4 --steps 2 --warmup 1) torch_args=(--models tiny --batch 1 --seq 256 --warmup 1 --iters 2)
    memcheck=() racecheck=()
  fi
  echo "proof.sh $MODE: deadline ${budget} s, output in $OUT, bundle unpacked in $W"

  step env 60 5 env.txt -- bash -c env_report
  if grep -qE '^(MISSING|OUTSIDE THE BUNDLE)' "$OUT/env.txt"; then
    grep -E '^(MISSING|OUTSIDE THE BUNDLE)' "$OUT/env.txt"
    SUMMARY[-1]=${SUMMARY[-1]/ ok / FAIL }
    FAILED=1
  fi
  grep -E '^(gpu|python|mpirun):' "$OUT/env.txt"

  local t np
  for t in "${GPU_TESTS[@]}"; do
    if [ ! -x "$W/bin/$t" ]; then row "$t" MISSING - "not in the bundle"; FAILED=1; continue; fi
    # shellcheck disable=SC2046
    if [ "$t" = test_conformance ]; then
      step "$t" 150 40 tests.log -- "${ours[@]}" "$W/bin/$t" $(gtest_args "$t")
    else
      step "$t" 90 20 tests.log -- "${ours[@]}" "$W/bin/$t" $(gtest_args "$t")
    fi
  done
  for t in "${NCCL_TESTS[@]}"; do
    for np in 2 4; do
      step "nccl_np$np" 120 30 nccl.log -- "${ours[@]}" mpirun -np "$np" --bind-to none -x LD_LIBRARY_PATH \
        -x "OMP_NUM_THREADS=$(( ncpu / np > 0 ? ncpu / np : 1 ))" -x VLM_SOURCE_DIR -x NCCL_DEBUG -x GTEST_COLOR "$W/bin/$t"
    done
  done
  step bench_gemm 60 20 perf.log -- "${ours[@]}" "$W/bin/bench_gemm" --device "$dev" "${gemm[@]}"
  step bench_llm_bf16 150 60 perf.log -- "${ours[@]}" "$W/bin/bench_llm" --device "$dev" --precision bf16 "${llm[@]}"
  step bench_step 90 30 perf.log -- "${ours[@]}" "$W/bin/bench_step" --device "$dev" "${stepb[@]}" \
    --trace "$OUT/step_trace.json"
  if "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
    local mode cap min
    for mode in eager compile; do
      cap=100 min=40
      [ $mode = compile ] && cap=180 min=80
      step "torch_$mode" $cap $min torch.log -- "$PYTHON" "$ROOT/bench/gpu/torch_baseline.py" --device "$dev" \
        "${torch_args[@]}" --modes $mode
    done
  else
    row torch SKIP - "no torch for $PYTHON"
    echo "[$(elapsed) s] torch: skipped (no torch for $PYTHON)"
    [ "$MODE" = rehearse ] && FAILED=1
  fi
  # Where the bf16 step's GPU time goes, kernel by kernel: Nsight Compute's durations
  # over one step of llama1b cut to 2 layers (bench/gpu/kernel_table.py). A rehearsal (no
  # ncu) runs the same step without the profiler.
  step kernels 120 40 perf.log -- bash -c kernel_profile
  # Our kernels (not cuBLASLt's and cuDNN's: matmul, conv) under memcheck, the kernels
  # with shared memory under racecheck, with the time left. A rehearsal runs the same
  # tests without the tool (no GPU here).
  # (Not the 16.8M-element cases either: the tool slows every access some 100 times.)
  local ours_only="Ops/Conformance.Cuda/*-*_matmul_*:*_conv2d_*:*_bias_backward_*:*_n16781313" c
  local shared=""
  for c in attention norm softmax cross_entropy vocab_ce sum_squares; do shared+="${shared:+:}Ops/Conformance.Cuda/*$c*"; done
  step memcheck $(( (END - $(date +%s)) * 2 / 3 )) 40 sanitizer.log -- "${ours[@]}" "${memcheck[@]}" \
    "$W/bin/test_conformance" "--gtest_filter=$ours_only"
  step racecheck 600 30 sanitizer.log -- "${ours[@]}" "${racecheck[@]}" "$W/bin/test_conformance" "--gtest_filter=$shared"

  # Ours against PyTorch: bench_llm's tokens/s over torch's, same model and shape.
  local a e c2 ratio=""
  a=$(tokens_per_s bench_llm_bf16 "$OUT/perf.log" 2>/dev/null)
  e=$(tokens_per_s torch_eager "$OUT/torch.log" 2>/dev/null)
  c2=$(tokens_per_s torch_compile "$OUT/torch.log" 2>/dev/null)
  [ -n "$a" ] && [ -n "$e" ] && ratio+="bench_llm bf16 / torch eager: $(awk -v a="$a" -v b="$e" 'BEGIN {printf "%.2f", a / b}')"
  [ -n "$a" ] && [ -n "$c2" ] && ratio+="${ratio:+; }/ torch compile: $(awk -v a="$a" -v b="$c2" 'BEGIN {printf "%.2f", a / b}')"
  {
    echo "GPU proof ($MODE) on $(grep -m1 '^gpu:' "$OUT/env.txt" | cut -c6-), $(elapsed) s of ${budget}, checkout $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
    printf '%-16s %-9s %5s  %s\n' step result time figure
    printf '%s\n' "${SUMMARY[@]}"
    [ -n "$ratio" ] && echo "tokens/s, ours over PyTorch's (same model, shape and GPU): $ratio"
  } >"$OUT/summary.txt"
  local files
  files=$(find "$OUT" -type f | wc -l)
  if [ "$files" -gt 8 ]; then
    echo "proof.sh: $files files in $OUT, more than the 8 the device tool brings back" >>"$OUT/summary.txt"
    FAILED=1
  fi
  echo "=== summary (logs in $OUT: $(ls "$OUT" | tr '\n' ' '))"
  cat "$OUT/summary.txt"
  return $FAILED
}

# ---- rehearse (here) ---------------------------------------------------------------
# Folders and programs of this machine that the GPU machine lacks and that could
# otherwise stand in for the bundle's: Open MPI and PMIx (components, help files,
# configuration, programs and libraries), the binaries' RPATH folders, ssh.
HIDE_DIRS=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi
  /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu/hdf5)
HIDE_FILES=(/usr/bin/orterun /usr/bin/orted /usr/bin/ssh /usr/bin/rsh)
HIDE_LIB_GLOBS=('libmpi*.so*' 'libopen-rte.so*' 'libopen-pal.so*' 'libpmix.so*' 'libhwloc.so*' 'libevent*.so*' 'libmca_common_*.so*')

cmd_rehearse() {
  [ "$(id -u)" = 0 ] || die "rehearse needs root (a mount namespace hides this machine's Open MPI)"
  [ -f "$TARBALL" ] || die "no $TARBALL: run 'bench/gpu/proof.sh build' first"
  exec unshare -m --propagation private bash "$0" _rehearse_inside
}

rehearse_inside() {
  local empty=/tmp/vlm-proof-empty d f
  mkdir -p "$empty" && : >"$empty.file"
  for d in "${HIDE_DIRS[@]}"; do [ -d "$d" ] && mount --bind "$empty" "$d"; done
  for f in "${HIDE_FILES[@]}"; do [ -e "$f" ] && mount --bind "$empty.file" "$f"; done
  local g n=0
  for g in "${HIDE_LIB_GLOBS[@]}"; do
    for f in /usr/lib/x86_64-linux-gnu/$g; do
      [ -f "$f" ] && [ ! -L "$f" ] && mount --bind "$empty.file" "$f" && n=$((n + 1))
    done
  done
  command -v mpirun >/dev/null && [ -s "$(readlink -f "$(command -v mpirun)")" ] && die "rehearse: the system's mpirun is still usable"
  echo "rehearse: hidden ${HIDE_DIRS[*]} ${HIDE_FILES[*]} and $n Open MPI libraries of /usr/lib/x86_64-linux-gnu"
  MODE=rehearse OUT=${OUT:-$BUILD/rehearse-out} BUDGET_S=${BUDGET_S:-1200}
  # PyTorch here: the venv of tools/torch_cpu_bench.py (its header says how to make it).
  PYTHON=${PYTHON:-$([ -x "$ROOT/.venv-bench/bin/python" ] && echo "$ROOT/.venv-bench/bin/python" || echo python3)}
  rm -rf "$OUT"
  cmd_run
}

case "${1:-}" in
  build) cmd_build ;;
  run) cmd_run ;;
  rehearse) cmd_rehearse ;;
  _rehearse_inside) rehearse_inside ;;
  *)
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
