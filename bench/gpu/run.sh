#!/usr/bin/env bash
# GPU checks and benchmarks for a lent H100/H200 machine (the `run` device tool; see
# /work/.library/device/README.md, METHOD.md, HOPPER.md). Two steps, because that
# machine has the CUDA toolkit (nvcc, cuBLAS/cuBLASLt in /usr/local/cuda), cuDNN and
# NCCL (as the pip packages nvidia-cudnn-cu13 / nvidia-nccl-cu13 of its PyTorch), cmake
# and ninja, but NONE of our Debian libraries or their headers, so the project cannot
# be configured there (find_package of MPI, HDF5, OpenCV, Boost, GTest, OpenBLAS fails).
#
#   1. Here (Debian, nvcc 13, no GPU needed):
#        bench/gpu/run.sh build
#      configures build-gpu/ with -DVLM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 (Release,
#      Ninja), builds test_gpu, test_conformance, bench_gemm, bench_attention and
#      bench_vision (the targets that exist, linked with --as-needed), and packs them,
#      with every shared
#      library they load that the device machine lacks, into build-gpu/bundle/vlm-gpu.tar.xz
#      (xz: libopenblas alone is 35 MB, 4 MB packed). Carried libraries (what
#      ldd finds; typically): libopenblas.so.0 (+ libgfortran.so.5, libquadmath.so.0),
#      libboost_program_options.so.1.74.0, libgomp.so.1, libgtest.so / libgtest_main.so
#      (when Debian's GTest is shared), libhdf5_serial*.so (+ libsz, libaec, libcurl...),
#      libmpi.so.40 (+ libopen-pal, libopen-rte, libhwloc, libevent), libopencv_core /
#      imgproc / imgcodecs.so.406 (+ their codec libraries), libstdc++.so.6, libgcc_s.so.1.
#      NOT carried (too large, and present there): libcudart/libcublas/libcublasLt.so.13
#      (/usr/local/cuda/lib64), libcudnn*.so.9 and libnccl.so.2 (pip nvidia packages),
#      libcuda.so.1 (driver), glibc (ours is 2.36, older than the device's, so our
#      binaries run there). The bundle must stay under the tool's 64 MiB: checked below.
#      (Unpacked, the OpenCV/HDF5/MPI dependency tree alone is ~200 MB: only binaries
#      that really call them, through --as-needed, make the bundle carry them.)
#   2. On the device machine, through the tool:
#        run(command="bench/gpu/run.sh device", carry=["build-gpu/bundle"], timeout_s=600)
#      runs test_gpu, test_conformance (the CUDA-vs-CPU op conformance), bench_gemm,
#      bench_attention and bench_vision with --device cuda, logging each to
#      $OUT/<name>.log, and prints a summary last (the tool returns the tail of the output).
# Notes: MPI is linked but the tests and benches here run single-process without
# mpirun. Timings: the benches time with synchronize + host clock after warm-up; report
# them with the device named in the tool's reply (H100 and H200 differ).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
BUNDLE=$BUILD/bundle           # what travels: vlm-gpu.tar.xz
STAGE=$BUILD/bundle-stage      # bin/ and lib/ before packing
TARGETS=(test_gpu test_conformance bench_gemm bench_attention bench_vision)

build() {
  local jobs=${JOBS:-2}  # nvcc is slow and the build machine's cores are shared
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVLM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_EXE_LINKER_FLAGS="-Wl,--as-needed" || exit 1
  local have
  have=$(ninja -C "$BUILD" -t targets all 2>/dev/null | sed 's/:.*//')
  local built=()
  for t in "${TARGETS[@]}"; do
    if grep -qx "$t" <<<"$have"; then built+=("$t"); else echo "run.sh: no target $t in this tree; skipped"; fi
  done
  [ ${#built[@]} -gt 0 ] || { echo "run.sh: nothing to build" >&2; exit 1; }
  cmake --build "$BUILD" -j "$jobs" --target "${built[@]}" || exit 1

  rm -rf "$BUNDLE" "$STAGE" && mkdir -p "$BUNDLE" "$STAGE/bin" "$STAGE/lib"
  for t in "${built[@]}"; do
    local f
    f=$(find "$BUILD" -type f -name "$t" -perm -u+x -not -path "$STAGE/*" | head -1)
    [ -n "$f" ] && cp "$f" "$STAGE/bin/"
  done
  # Every shared library the binaries load, except glibc's and CUDA's (see above).
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)'
  for b in "$STAGE"/bin/*; do
    ldd "$b" | awk '/=> \// {print $1, $3}'
  done | sort -u | while read -r name path; do
    grep -qE "$skip" <<<"$name" || cp -L "$path" "$STAGE/lib/$name"
  done
  strip --strip-unneeded "$STAGE"/lib/* 2>/dev/null || true
  echo "run.sh: carrying $(ls "$STAGE/lib" | wc -l) libraries: $(ls "$STAGE/lib" | tr '\n' ' ')"
  tar -C "$STAGE" -cf - bin lib | xz -T2 -6 >"$BUNDLE/vlm-gpu.tar.xz" || exit 1
  local mib
  mib=$(du -sm "$BUNDLE" | cut -f1)
  echo "run.sh: bundle $BUNDLE: ${mib} MiB packed ($(ls "$STAGE/bin" | tr '\n' ' '))"
  if [ "$mib" -gt 60 ]; then
    echo "run.sh: over the device tool's 64 MiB; build fewer targets (TARGETS) or strip the binaries" >&2
    exit 1
  fi
  echo "next: run(command=\"bench/gpu/run.sh device\", carry=[\"${BUNDLE#$ROOT/}\"], timeout_s=600)"
}

device() {
  local out=${OUT:-/tmp/vlm-gpu-out}
  mkdir -p "$out"
  [ -f "$BUNDLE/vlm-gpu.tar.xz" ] || { echo "run.sh: no $BUNDLE (run 'bench/gpu/run.sh build' here and carry it)" >&2; exit 2; }
  local dir=/tmp/vlm-gpu
  rm -rf "$dir" && mkdir -p "$dir" && xz -dc "$BUNDLE/vlm-gpu.tar.xz" | tar -C "$dir" -xf - || exit 2
  # CUDA libraries of the machine: the toolkit, then the pip nvidia-* packages.
  local libpath="$dir/lib:/usr/local/cuda/lib64"
  local pydirs
  pydirs=$(python3 -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))' 2>/dev/null)
  for d in $pydirs; do
    [ -d "$d/nvidia" ] || continue
    libpath+=":$(find "$d/nvidia" -name 'lib*.so*' -printf '%h\n' | sort -u | paste -sd:)"
  done
  export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
  local missing
  missing=$(for b in "$dir"/bin/*; do ldd "$b" | grep 'not found'; done | sort -u)
  [ -z "$missing" ] || { echo "run.sh: unresolved libraries:"; echo "$missing"; }

  local summary=() rc=0
  run_one() {  # name, command...
    local name=$1 st
    shift
    echo "=== $name: $*"
    "$@" >"$out/$name.log" 2>&1
    st=$?
    tail -n 40 "$out/$name.log"
    summary+=("$(printf '%-18s exit %d' "$name" "$st")")
    [ "$st" -eq 0 ] || rc=1
  }
  [ -x "$dir/bin/test_gpu" ] && run_one test_gpu "$dir/bin/test_gpu"
  [ -x "$dir/bin/test_conformance" ] && run_one test_conformance "$dir/bin/test_conformance"
  [ -x "$dir/bin/bench_gemm" ] && run_one bench_gemm "$dir/bin/bench_gemm" --device cuda
  [ -x "$dir/bin/bench_attention" ] && run_one bench_attention "$dir/bin/bench_attention" --device cuda
  [ -x "$dir/bin/bench_vision" ] && run_one bench_vision "$dir/bin/bench_vision" --device cuda
  echo "=== summary (logs in $out)"
  printf '%s\n' "${summary[@]}"
  return $rc
}

case "${1:-}" in
  build) build ;;
  device) device ;;
  *)
    echo "usage: bench/gpu/run.sh build   (here: configure, build, pack build-gpu/bundle)" >&2
    echo "       bench/gpu/run.sh device  (on the lent GPU machine, with build-gpu/bundle carried)" >&2
    exit 2
    ;;
esac
