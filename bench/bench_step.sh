#!/usr/bin/env bash
# bench_step: the VLM step in serial and overlap mode (bench/bench_step.cpp) at three
# layouts: 1 rank, then under mpirun -np 2 with TP = 2 and with DP = 2. Each prints the
# step time per mode, the overlap fraction, the exposed communication, the busy time
# per stream and the serial / overlap ratio. Figures only.
#   bench/bench_step.sh [bench_step options, e.g. --micro_batches 4 --images 8 --steps 10]
# Environment: BENCH (default build/bench/bench_step), LAYOUTS (default "1:1 2:2 2:1":
# ranks:tp), OMP_NUM_THREADS (default 1 per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${BENCH:-build/bench/bench_step}
LAYOUTS=${LAYOUTS:-"1:1 2:2 2:1"}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 \
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
[ -x "$BENCH" ] || { echo "bench_step: $BENCH missing (build first: ./run build)" >&2; exit 2; }
echo "bench_step: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for layout in $LAYOUTS; do
  np=${layout%%:*} tp=${layout##*:}
  echo "--- $np rank(s), tp=$tp, dp=$((np / tp))"
  if [ "$np" -gt 1 ]; then
    mpirun --oversubscribe -np "$np" "$BENCH" --tp "$tp" "$@"
  else
    "$BENCH" --tp "$tp" "$@"
  fi
done
