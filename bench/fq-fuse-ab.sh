#!/bin/bash
# A QDQ model's float32 convs with their FakeQuant in oneDNN's epilogue (the
# default) against the FakeQuant passes (CONVD_FQ_FUSE=off) and against the
# float32 original, interleaved, in process (docs/QUANTIZATION.md, "Conv+FQ";
# docs/PERFORMANCE.md, "int8: avx2"). Prints one line per run: model, config,
# median and min ms of convd-run --bench N.
#
#   bench/fq-fuse-ab.sh [--isa avx2|native] [--threads T] [--rounds R] [--runs N] MODEL...
#
# MODEL: a bench model name (bench/benchmodels.py, e.g. resnet50, mobilenetv2,
# resnet50-u90): NAME.onnx and NAME-qdq.onnx from bench/int8.py's cache
# (~/.cache/convd/bench-models; run bench/int8.py once to make them).
set -euo pipefail
isa=avx2 threads=1 rounds=3 runs=30
while [ $# -gt 0 ]; do
    case $1 in
    --isa) isa=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) break ;;
    esac
done
dir=${CONVD_BENCH_MODELS:-$HOME/.cache/convd/bench-models}
run=$(dirname "$0")/../build/bin/convd-run
caps=()
[ "$isa" = avx2 ] && caps=(CONVD_MAX_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2)
echo "# $(date -u +%FT%TZ) isa $isa threads $threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    for m in "$@"; do
        name=$(ls "$dir" | grep -E "^$(echo "$m" | sed 's/-.*//')-s224-.*-v1$(echo "$m" | grep -o -- '-[ubf][0-9]*$' || true)\.onnx$" | head -1)
        [ -n "$name" ] || { echo "no model $m in $dir" >&2; exit 2; }
        f32=$dir/$name qdq=${dir}/${name%.onnx}-qdq.onnx
        for cfg in f32 fused passes; do
            file=$qdq fuse=on
            [ $cfg = f32 ] && file=$f32
            [ $cfg = passes ] && fuse=off
            out=$(env "${caps[@]}" CONVD_FQ_FUSE=$fuse "$run" "$file" --threads "$threads" --bench "$runs" 2>/dev/null | tail -1)
            echo "$m $cfg $(echo "$out" | sed 's/.*median \([0-9.]*\) ms.*min \([0-9.]*\) ms.*/\1 \2/')"
        done
    done
done
