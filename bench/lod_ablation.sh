#!/usr/bin/env bash
# lod_ablation: the learned-level-of-detail experiment of docs/results.md ("Learned level of
# detail"), in one command: builds the colour scenes (vlm data build --data.from colours)
# and their tokenizer, then runs `vlm ablate` with configs/colours.cfg into one folder:
#   1. uniform at full detail (budget 16: every quadrant at one token per slot): the
#      accuracy the task allows;
#   2. relevance, uniform and random at budget 7 (one quadrant at full detail, three
#      pooled), and uniform at 4 (every quadrant pooled), seed 1;
#   3. the rows that decide the headline -- relevance, uniform and random at 7, uniform
#      at 16 -- again with seeds 2 and 3.
# Every row trains 12,000 steps (about 11 minutes on 2 cores) and answers
# ablate.eval_samples = 1000 test questions. The folder gets ablation.csv/.md (rows, then
# their summary over seeds: mean accuracy +- one standard error over seeds and questions),
# ablation.png (accuracy against visual tokens with error bars) and training.png
# (relevance precision of the training batches). Resumable: a rerun skips the rows
# already in ablation.csv.
#   bench/lod_ablation.sh [extra vlm ablate options, e.g. --steps 300]
# Environment: VLM (default build-cpu/apps/vlm), OUT (default out/colours), SCENES
# (default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
VLM=${VLM:-build-cpu/apps/vlm}
OUT=${OUT:-out/colours}
SCENES=${SCENES:-20000}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
[ -x "$VLM" ] || { echo "lod_ablation: $VLM missing (build the vlm target, or set VLM)" >&2; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)
echo "lod_ablation: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
DATA="$OUT/digits64_20k.h5" TOK="$OUT/digits64_20k_tok.json"
if [ ! -f "$DATA" ]; then
  "$VLM" data build --data.from colours --data.limit "$SCENES" --data.out "$DATA"
fi
if [ ! -f "$TOK" ]; then
  "$VLM" data tokenizer --data.train "$DATA" --data.vocab 512 --data.out "$TOK"
fi
ablate() {
  "$VLM" ablate --config configs/colours.cfg --data.path "$DATA" --data.tokenizer "$TOK" \
    --out "$OUT/ablation" "$@"
}
ablate --lod uniform --budgets 16 --seeds 1 "$@"
ablate --lod relevance,uniform,random --budgets 7 --seeds 1 "$@"
ablate --lod uniform --budgets 4 --seeds 1 "$@"
ablate --lod relevance,uniform,random --budgets 7 --seeds 2,3 "$@"
ablate --lod uniform --budgets 16 --seeds 2,3 "$@"
echo "lod_ablation: done in $(( $(date +%s) - start )) s: $OUT/ablation/ablation.{csv,md,png} and training.png"
