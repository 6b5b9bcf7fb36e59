#!/usr/bin/env bash
# Dense conv kernels on ResNet-50 / MobileNetV2 layer shapes, batch 1 and 8,
# 1 and 2 threads: oneDNN nChw16c vs NCHW vs im2col + OpenBLAS sgemm, plus
# reorder costs and the wrapper's per-call overhead.
# Prints markdown tables (bench/results/dense-conv-layers.md holds a recorded
# run; --out FILE also writes them to FILE).
#
#   bench/conv-dense-layers.sh [--reps R] [--min-ms M] [--model NAME] [--batches "1 8"] [--threads "1 2"]
#                              [--out FILE]
#
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the benchmark process
# only (they may pin OpenBLAS to a slower kernel on this VM); tests never
# change them.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=7 MINMS=10 MODEL=all BATCHES="1 8" THREADS="1 2" OUTFILE=
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) REPS=$2; shift 2 ;;
        --min-ms) MINMS=$2; shift 2 ;;
        --model) MODEL=$2; shift 2 ;;
        --batches) BATCHES=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --out) OUTFILE=$2; shift 2 ;;
        *) echo "usage: $0 [--reps R] [--min-ms M] [--model NAME] [--batches LIST] [--threads LIST] [--out FILE]" >&2; exit 2 ;;
    esac
done
make -s bench >/dev/null
if [ -n "$OUTFILE" ]; then exec > >(tee "$OUTFILE"); fi
BIN=${BUILD:-build}/bin/conv-dense-layers
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, libdnnl $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null), openblas $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null)"
echo "# reps=$REPS min-ms=$MINMS; times are medians in ms per call; (x) = time / oneDNN nChw16c time"
echo
echo "| model | layer | batch | threads | GFLOP | oneDNN 16c ms | GFLOP/s | oneDNN NCHW ms | im2col+sgemm ms | reorder in + out ms (% of 16c conv) | oneDNN impl (16c) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for t in $THREADS; do
    for b in $BATCHES; do
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_PROC_BIND=false \
            "$BIN" --threads "$t" --batch "$b" --reps "$REPS" --min-ms "$MINMS" --model "$MODEL"
    done
done
echo
for t in $THREADS; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BIN" --threads "$t" --reps "$REPS" --overhead
done
