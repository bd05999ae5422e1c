#!/usr/bin/env bash
# lod_ablation: the learned-level-of-detail experiment of docs/results.md ("Learned level of
# detail"), in one command: builds the colour scenes (vlm data build --data.from colours)
# and their tokenizer, then runs `vlm ablate` with configs/colours.cfg into one folder:
#   1. uniform at full detail (budget G*G = 256): the accuracy the task allows;
#   2. relevance, uniform and random at budgets 31, 62 and 124 (31 = 16 regions + one
#      region at full detail under lod.order=depth; 124 = 4 x 31), seed 1;
#   3. the rows that decide the headline -- relevance, uniform and random at 31, uniform
#      at 124 -- again with seeds 2 and 3.
# Every row answers ablate.eval_samples = 1000 test questions. The folder gets
# ablation.csv/.md (rows, then their summary over seeds: mean accuracy +- one standard
# error over seeds and questions), ablation.png (accuracy against visual tokens with
# error bars) and training.png (relevance precision of the training batches at budget
# 31). Resumable: a rerun skips the rows already in ablation.csv.
#   bench/lod_ablation.sh [extra vlm ablate options, e.g. --steps 300]
# Environment: VLM (default build-cpu/apps/vlm), OUT (default out/colours), SCENES
# (default 5000).
set -euo pipefail
cd "$(dirname "$0")/.."
VLM=${VLM:-build-cpu/apps/vlm}
OUT=${OUT:-out/colours}
SCENES=${SCENES:-5000}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
[ -x "$VLM" ] || { echo "lod_ablation: $VLM missing (build the vlm target, or set VLM)" >&2; exit 2; }
mkdir -p "$OUT"
start=$(date +%s)
echo "lod_ablation: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -f "$OUT/digits64.h5" ]; then
  "$VLM" data build --data.from colours --data.limit "$SCENES" --data.test_fraction 0.1 --data.out "$OUT/digits64.h5"
fi
if [ ! -f "$OUT/digits64_tok.json" ]; then
  "$VLM" data tokenizer --data.train "$OUT/digits64.h5" --data.vocab 300 --data.out "$OUT/digits64_tok.json"
fi
ablate() {
  "$VLM" ablate --config configs/colours.cfg --data.path "$OUT/digits64.h5" --data.tokenizer "$OUT/digits64_tok.json" \
    --out "$OUT/ablation" "$@"
}
ablate --lod uniform --budgets 256 --seeds 1 "$@"
ablate --lod relevance,uniform,random --budgets 31,62,124 --seeds 1 "$@"
ablate --lod relevance,uniform,random --budgets 31 --seeds 2,3 "$@"
ablate --lod uniform --budgets 124 --seeds 2,3 "$@"
echo "lod_ablation: done in $(( $(date +%s) - start )) s: $OUT/ablation/ablation.{csv,md,png} and training.png"
