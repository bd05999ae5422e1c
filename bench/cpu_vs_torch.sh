#!/usr/bin/env bash
# The CPU backend side by side with PyTorch on CPU (figures: docs/cpu-performance.md).
# For each round and each thread count, runs our benchmarks (bench_llm, bench_gemm,
# bench_attention) and tools/torch_cpu_bench.py one after the other, alternating which
# side goes first (ours, torch, torch, ours, ...), with OMP_NUM_THREADS set for both
# (our default thread count and torch.set_num_threads). Prints the load before each
# measurement, then per case and thread count the median over rounds of each side's
# figure (a step or call time, itself a median of ITERS runs) and torch/ours (> 1: ours
# is faster); the 2-thread speed-up of our steps; and the per-round figures to a file.
# Neither the build nor the tests need this script or PyTorch (see the header of
# tools/torch_cpu_bench.py for installing torch from PyPI).
# Usage: bench/cpu_vs_torch.sh [BUILD_DIR (default build)]
# Environment: PY (python with torch; default .venv-bench/bin/python, the project-local
#   venv of tools/torch_cpu_bench.py's header),
#   ROUNDS (3), THREADS ("1 2"), MODELS ("gpt2 llama1b"), ITERS (5 timed steps, after 1
#   warm-up), CASES ("llm gemm attn"), LLAMA_ADAMW (0: the 1.1B model without AdamW;
#   1: with, ~18 GB per side), COMPILE (0; 1: torch.compile'd models too, minutes),
#   RAW (file for the per-round figures; default cpu_vs_torch.raw in BUILD_DIR).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
PY=${PY:-.venv-bench/bin/python}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1 2}
MODELS=${MODELS:-gpt2 llama1b}
ITERS=${ITERS:-5}
CASES=${CASES:-llm gemm attn}
LLAMA_ADAMW=${LLAMA_ADAMW:-0}
COMPILE=${COMPILE:-0}
RAW=${RAW:-$BUILD_DIR/cpu_vs_torch.raw}
for b in bench_llm bench_gemm bench_attention; do
  [ -x "$BUILD_DIR/bench/$b" ] || { echo "cpu_vs_torch: $BUILD_DIR/bench/$b missing (build first: ./run build)" >&2; exit 2; }
done
"$PY" -c 'import sys, os; sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL); import torch' 2>/dev/null ||
  { echo "cpu_vs_torch: PY=$PY cannot import torch (see tools/torch_cpu_bench.py)" >&2; exit 2; }
: > "$RAW"

# Appends "side threads key seconds" lines to $RAW.
record() { echo "$1 $2 $3 $4" >> "$RAW"; }

ours() {  # threads
  local t=$1 m line opt
  export OMP_NUM_THREADS=$t
  if [[ " $CASES " == *" llm "* ]]; then
    for m in $MODELS; do
      for opt in none adamw; do
        [ "$opt" = adamw ] && [ "$m" = llama1b ] && [ "$LLAMA_ADAMW" != 1 ] && continue
        line=$("$BUILD_DIR/bench/bench_llm" --device cpu --models "$m" --iters "$ITERS" --warmup 1 \
          --optimizer "$opt" 2>/dev/null | grep "^$m ")
        echo "  ours  $line"
        local step; step=$(sed -E 's/.* ([0-9.]+) s \(median.*/\1/' <<< "$line")
        if [ "$opt" = none ]; then
          record ours "$t" "$m.fwdbwd" "$step"
        else
          record ours "$t" "$m.fwdbwd_adamw" "$step"
          record ours "$t" "$m.adamw" "$(sed -E 's/.*AdamW ([0-9.]+) s$/\1/' <<< "$line")"
        fi
      done
    done
  fi
  if [[ " $CASES " == *" gemm "* ]]; then
    "$BUILD_DIR/bench/bench_gemm" --device cpu 2>/dev/null | awk '$1 == "f32" {print $2, $3, $4, $5}' |
      while read -r M N K ms; do
        echo "  ours  gemm ${M}x${N}x${K} $ms ms"
        record ours "$t" "gemm.${M}x${N}x${K}" "$(awk -v v="$ms" 'BEGIN {print v / 1e3}')"
      done
  fi
  if [[ " $CASES " == *" attn "* ]]; then
    "$BUILD_DIR/bench/bench_attention" --device cpu 2>/dev/null | awk '$5 == "causal" || $5 == "full"' |
      while read -r lens nh nkv hs mask fwd _ bwd _; do
        local key="attn.$lens.nh$nh.nkv$nkv.hs$hs.$mask"
        echo "  ours  $key fwd $fwd ms bwd $bwd ms"
        record ours "$t" "$key.fwd" "$(awk -v v="$fwd" 'BEGIN {print v / 1e3}')"
        record ours "$t" "$key.bwd" "$(awk -v v="$bwd" 'BEGIN {print v / 1e3}')"
      done
  fi
}

torch_side() {  # threads
  local t=$1 cases="" extra=() line
  for c in $CASES; do cases+="${cases:+,}$c"; done
  [ "$LLAMA_ADAMW" = 1 ] || [[ " $MODELS " != *" llama1b "* ]] || extra+=(--no-adamw-for llama1b)
  [ "$COMPILE" = 1 ] && extra+=(--compile)
  OMP_NUM_THREADS=$t "$PY" tools/torch_cpu_bench.py --cases "$cases" --models "${MODELS// /,}" --threads "$t" \
    --iters "$ITERS" --warmup 1 "${extra[@]}" 2>/dev/null | while read -r line; do
    if [[ $line == RESULT* ]]; then
      read -r _ key sec <<< "$line"
      record torch "$t" "$key" "$sec"
    else
      echo "  torch $line"
    fi
  done
}

for r in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    echo "== round $r, $t thread(s); load: $(uptime | sed 's/.*load average/load average/')"
    if [ $((r % 2)) = 1 ]; then ours "$t"; torch_side "$t"; else torch_side "$t"; ours "$t"; fi
  done
done
echo "== done; load: $(uptime | sed 's/.*load average/load average/'); per-round figures in $RAW"

python3 - "$RAW" "$THREADS" <<'EOF'
import statistics, sys
from collections import defaultdict
raw, threads = sys.argv[1], sys.argv[2].split()
vals = defaultdict(list)  # (side, threads, key) -> seconds per round
for line in open(raw):
    side, t, key, sec = line.split()
    if side == "torch":  # gpt2.eager.fwdbwd -> eager gpt2.fwdbwd
        parts = key.split(".")
        if parts[1] in ("eager", "compile"):
            side, key = "torch." + parts[1], ".".join([parts[0]] + parts[2:])
        else:
            side = "torch.eager"
    vals[(side, t, key)].append(float(sec))
med = {k: statistics.median(v) for k, v in vals.items()}
keys = sorted({k for (_, _, k) in med}, key=lambda k: (k.split(".")[0] not in ("gpt2", "llama1b"), k))
print(f"\n{'case':<44} {'thr':>3} {'ours':>10} {'torch':>10} {'torch/ours':>10} {'compile':>10} {'comp/ours':>9}")
for k in keys:
    for t in threads:
        o, e, c = med.get(("ours", t, k)), med.get(("torch.eager", t, k)), med.get(("torch.compile", t, k))
        if o is None and e is None:
            continue
        f = lambda x: f"{x * 1e3:9.1f}m" if x is not None and x < 1 else (f"{x:9.3f}s" if x is not None else f"{'-':>10}")
        r = lambda x: f"{x / o:10.2f}" if x is not None and o else f"{'-':>10}"
        print(f"{k:<44} {t:>3} {f(o)} {f(e)} {r(e)} {f(c)} {r(c)[1:]}")
print("\nour 2-thread speed-up (1-thread time / 2-thread time):")
for k in keys:
    a, b = med.get(("ours", "1", k)), med.get(("ours", "2", k))
    if a and b and k.split(".")[0] in ("gpt2", "llama1b"):
        print(f"  {k:<40} {a / b:5.2f}x")
EOF
