#!/usr/bin/env bash
# Sparse conv kernels vs oneDNN's best dense conv on ResNet-50 / MobileNetV2
# layer shapes (bench/sparse-conv-layers.c), batch 1 and 8, 1 and 2 threads,
# all in one run. Prints the Markdown table; with --write also replaces the
# "Sparse conv kernels" section of bench/results/sparse-conv-layers.md (the
# file is created when absent; docs/PERFORMANCE.md quotes its summary).
#
#   bench/sparse-conv-layers.sh [--write] [options of sparse-conv-layers]
#   bench/sparse-conv-layers.sh --write --table FILE   (splice a saved run)
#   e.g. bench/sparse-conv-layers.sh --layers r50 --batch 1 --threads 1
set -euo pipefail
cd "$(dirname "$0")/.."
WRITE=0
TABLE=
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --write) WRITE=1; shift ;;
        --table) TABLE=$2; shift 2 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
BUILD=${BUILD:-build}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
if [ -n "$TABLE" ]; then
    cp "$TABLE" "$OUT"
else
    make -s BUILD="$BUILD" "$BUILD/bin/sparse-conv-layers" >/dev/null
    {
    echo "Measured $(date -u +%F) on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
         "$(nproc) cores (shared), libdnnl $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null)," \
         "with \`bench/sparse-conv-layers.sh ${ARGS[*]:-}\`."
    echo
    OMP_PROC_BIND=false "$BUILD/bin/sparse-conv-layers" "${ARGS[@]}" 2>/dev/null
    } | tee "$OUT"
fi
if [ "$WRITE" = 1 ]; then
    python3 - "$OUT" <<'PY'
import os, re, sys
table = open(sys.argv[1]).read().rstrip() + "\n"
path = "bench/results/sparse-conv-layers.md"
doc = open(path).read() if os.path.exists(path) else ""
head = "## Sparse conv kernels\n"
intro_path = "bench/sparse-conv-layers.md"
intro = open(intro_path).read().rstrip() + "\n\n" if os.path.exists(intro_path) else ""
section = head + "\n" + intro + table
m = re.search(r"^## Sparse conv kernels\n.*?(?=^## |\Z)", doc, flags=re.S | re.M)
if m:
    doc = doc[:m.start()] + section + ("\n" if doc[m.end():] else "") + doc[m.end():]
else:
    doc = doc.rstrip() + "\n\n" + section
open(path, "w").write(doc)
print(f"wrote the section to {path}", file=sys.stderr)
PY
fi
