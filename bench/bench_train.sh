#!/usr/bin/env bash
# bench_train: the training step of `vlm train` measured through the real trainer, for a
# config (default configs/demo_fashion.cfg on out/demo/fashion.h5, made by ./run demo):
# for each layout (1 rank; mpirun -np 2 with TP=2; mpirun -np 2 with DP=2) and each
# scheduler mode (serial, overlap) it runs STEPS steps (default 100; the means include
# the first steps) and prints the mean step time, images/s, tokens/s, the overlap
# fraction, the exposed communication, the loader stall (fraction of the time spent
# waiting for batches) and the busy time per stream (from the scheduler's summary),
# then the serial / overlap ratio of each layout.
#   bench/bench_train.sh [extra vlm train options]
# Environment: VLM (default build/apps/vlm), CONFIG, DATA, TOKENIZER, STEPS, LAYOUTS
# (default "1:1 2:2 2:1": ranks:tp), MODES (default "serial overlap").
set -euo pipefail
cd "$(dirname "$0")/.."
VLM=${VLM:-build/apps/vlm}
CONFIG=${CONFIG:-configs/demo_fashion.cfg}
DATA=${DATA:-out/demo/fashion.h5}
TOKENIZER=${TOKENIZER:-out/demo/fashion_tok.json}
STEPS=${STEPS:-100}
LAYOUTS=${LAYOUTS:-"1:1 2:2 2:1"}
MODES=${MODES:-"serial overlap"}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
[ -f "$DATA" ] || { echo "bench_train: $DATA missing (run ./run demo first, or set DATA/TOKENIZER)" >&2; exit 2; }
echo "bench_train: $CONFIG, $STEPS steps per run, $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-14s %-8s %9s %9s %9s %8s %10s %8s  %s\n' layout mode ms/step img/s tok/s overlap "exp.comm" stall "busy ms per stream"
for layout in $LAYOUTS; do
  np=${layout%%:*} tp=${layout##*:}
  dp=$((np / tp))
  declare -A ms=()
  for mode in $MODES; do
    log="$OUT/$np-$tp-$mode.log"
    cmd=("$VLM" train --config "$CONFIG" --data.path "$DATA" --data.tokenizer "$TOKENIZER" --train.steps "$STEPS"
         --tp "$tp" --scheduler.mode "$mode" --train.out_dir "$OUT/runs" --train.run "r$np$tp$mode" --eval.split ""
         --train.log_every 1000000 "$@")
    if [ "$np" -gt 1 ]; then mpirun --oversubscribe -np "$np" "${cmd[@]}" >"$log" 2>&1; else "${cmd[@]}" >"$log" 2>&1; fi
    line=$(grep '^time per step' "$log")
    summary=$(grep '^vlm train:' "$log" | tail -1)
    step=$(sed -E 's/.*\(mean\): ([0-9.]+) ms.*/\1/' <<<"$line")
    ms[$mode]=$step
    printf '%-14s %-8s %9s %9s %9s %8s %10s %8s  %s\n' "tp=$tp dp=$dp" "$mode" "$step" \
      "$(sed -E 's/.*\| ([0-9.]+) img\/s.*/\1/' <<<"$summary")" "$(sed -E 's/.*\| ([0-9.]+) tok\/s.*/\1/' <<<"$summary")" \
      "$(sed -E 's/.*overlap ([0-9.]+);.*/\1/' <<<"$line")" "$(sed -E 's/.*exposed comm ([0-9.]+) ms.*/\1/' <<<"$line")" \
      "$(sed -E 's/.*loader stall ([0-9.]+%).*/\1/' <<<"$line")" "$(sed -E 's/.*per stream: ([^;]*);.*/\1/' <<<"$line")"
  done
  if [ -n "${ms[serial]:-}" ] && [ -n "${ms[overlap]:-}" ]; then
    echo "  tp=$tp dp=$dp: serial / overlap = $(awk "BEGIN{printf \"%.2f\", ${ms[serial]} / ${ms[overlap]}}")"
  fi
  unset ms
done
