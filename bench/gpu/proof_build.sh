# Sourced by bench/gpu/proof.sh: `proof.sh build` (here) builds the sm_90 test and bench
# binaries and packs them, with the shared libraries the GPU machine lacks and a
# relocatable Open MPI, into the bundle. Reads proof.sh's settings (ROOT, BUILD, BUNDLE,
# TARBALL, MAX_MIB, GPU_TESTS, NCCL_TESTS, BENCHES, SYSTEM_LIBS, die).
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
