#!/usr/bin/env bash
# lod_ablation: the learned-level-of-detail experiment of docs/lod-experiment.md, in one
# command: builds the colour scenes (vlm data build --data.from colours, colour-last
# questions), the curriculum's scenes of one item and the tokenizer, then runs `vlm
# ablate` with configs/colours.cfg:
#   seed 1: relevance, uniform and random at budgets 4 (every quadrant pooled), 7 (one
#           quadrant at full detail) and 16 (full detail): 9 rows;
#   seeds 3 and 5: the rows that decide the headline, relevance, uniform and random at 7
#           and uniform at 16: 4 rows each.
# Every row trains 8,000 steps (the first 1,500 on the curriculum) and answers
# ablate.eval_samples = 1000 test questions; the rows of one seed share their first 4,800
# steps (full detail: docs/ablations.md, "Shared prefix"). The two halves run side by
# side, one process per core (seed 1 in one, seeds 3 and 5 in the other), each into its
# own folder; their rows are then joined into <OUT>/ablation: ablation.csv/.md (rows,
# then their summary over seeds: mean accuracy +- one standard error over seeds and
# questions), ablation.png (accuracy against visual tokens with error bars) and
# training.png. Resumable: a rerun skips the rows already done.
#   bench/lod_ablation.sh [extra vlm ablate options, e.g. --steps 300]
# Environment: VLM (default build-cpu/apps/vlm), OUT (default out/colours), SCENES
# (default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
VLM=${VLM:-build-cpu/apps/vlm}
OUT=${OUT:-out/colours}
SCENES=${SCENES:-20000}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
[ -x "$VLM" ] || { echo "lod_ablation: $VLM missing (build the vlm target, or set VLM)" >&2; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)
echo "lod_ablation: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# The task (colour-last questions: "which item is red" -> "seven") and the curriculum of
# configs/colours.cfg (one item per scene, other scenes: seed 2).
DATA="$OUT/colourlast_20k.h5" TOK="$OUT/colourlast_20k_tok.json" ONE="$OUT/colourlast_one20k.h5"
if [ ! -f "$DATA" ]; then
  "$VLM" data build --data.from colours --data.colour_question colour_last --data.limit "$SCENES" --data.out "$DATA"
fi
if [ ! -f "$ONE" ]; then
  "$VLM" data build --data.from colours --data.colour_question colour_last --data.colour_min_items 1 \
    --data.colour_items 1 --data.seed 2 --data.limit "$SCENES" --data.out "$ONE"
fi
if [ ! -f "$TOK" ]; then
  "$VLM" data tokenizer --data.train "$DATA" --data.vocab 512 --data.out "$TOK"
fi
ablate() {  # ablate <folder> <vlm ablate options...>
  local dir=$1
  shift
  "$VLM" ablate --config configs/colours.cfg --data.path "$DATA" --data.tokenizer "$TOK" --data.curriculum "$ONE" \
    --out "$dir" "$@"
}
EXTRA=("$@")
first() {
  ablate "$OUT/seed1" --lod relevance,uniform,random --budgets 4,7,16 --seeds 1 "${EXTRA[@]}"
}
second() {
  for s in 3 5; do
    ablate "$OUT/seed$s" --lod relevance,uniform,random --budgets 7 --seeds "$s" "${EXTRA[@]}"
    ablate "$OUT/seed$s" --lod uniform --budgets 16 --seeds "$s" "${EXTRA[@]}"
  done
}
first > "$OUT/seed1.log" 2>&1 &
one=$!
second > "$OUT/seeds35.log" 2>&1 &
two=$!
echo "lod_ablation: seed 1 (log $OUT/seed1.log) and seeds 3, 5 (log $OUT/seeds35.log) side by side"
status=0
wait $one || status=$?
wait $two || status=$?
[ $status -eq 0 ] || { echo "lod_ablation: a half failed (exit $status): see the logs" >&2; exit $status; }
# One table of every row: the halves' rows joined, then vlm ablate over the same lists
# (every row already there: nothing trains, the files are written from all of them).
mkdir -p "$OUT/ablation"
{
  head -n 1 "$OUT/seed1/ablation.csv"
  for s in 1 3 5; do tail -n +2 "$OUT/seed$s/ablation.csv"; done
} > "$OUT/ablation/ablation.csv.tmp"
mv "$OUT/ablation/ablation.csv.tmp" "$OUT/ablation/ablation.csv"
ablate "$OUT/ablation" --lod uniform --budgets 16 --seeds 3,5 "${EXTRA[@]}"
ablate "$OUT/ablation" --lod relevance,uniform,random --budgets 7 --seeds 3,5 "${EXTRA[@]}"
ablate "$OUT/ablation" --lod relevance,uniform,random --budgets 4,7,16 --seeds 1 "${EXTRA[@]}"
echo "lod_ablation: done in $(( $(date +%s) - start )) s: $OUT/ablation/ablation.{csv,md,png} and training.png"
