# Sourced by bench/gpu/proof.sh: the pieces of the run (there; here under rehearse): the
# step runner under the deadline, the readers of the logs that make the summary, the
# bundle's library path and Open MPI, and the environment and kernel-profile steps.
# Reads proof.sh's settings (ROOT, SYSTEM_LIBS, die) and, when cmd_run calls them, END,
# OUT, W, LIBPATH and MODE.
elapsed() { echo $(( $(date +%s) - T0 )); }
row() { SUMMARY+=("$(printf '%-16s %-9s %5s  %s' "$@")"); }

# step NAME CAP MIN LOG -- COMMAND...: runs COMMAND with the timeout CAP cut to what is
# left before the deadline END, its output appended to $OUT/LOG between the markers
# ">>> NAME: ..." and "<<< NAME: ..."; skipped when less than MIN seconds are left, or
# when STEPS (names separated by spaces) is set and does not name it (env always runs).
step() {
  local name=$1 cap=$2 min=$3 log=$OUT/$4
  shift 5
  local left=$(( END - $(date +%s) )) t0 rc verdict=ok fig shown
  local t=$(( cap < left ? cap : left ))
  if [ -n "${STEPS:-}" ] && [ "$name" != env ] && [[ " $STEPS " != *" $name "* ]]; then
    row "$name" SKIP - "not in STEPS"
    return
  fi
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
    bench_step*) echo "$(grep -oE 'serial / overlap: [0-9.]+' <<<"$sect" | tail -1), overlap fraction $(awk '$1 == "overlap" {print $3}' <<<"$sect" | tail -1), host $(awk '$1 == "overlap" {print $5 " of " $2}' <<<"$sect" | tail -1) ms, $(grep -oE 'overlap step / backbone alone: [0-9.]+' <<<"$sect" | tail -1)" ;;
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
    test_conformance) echo "--gtest_filter=Ops/Conformance.Cuda/*:ConformanceTable.*:ConformanceAttention.*" ;;
  esac
}
