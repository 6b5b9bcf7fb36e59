#!/usr/bin/env python3
"""Checks the one direction of calls: every `#include "..."` of the product's
sources (core/ kernels/ sparse/ backends/ proto/ runtime/ daemon/ client/
tools/) must name a file of its own unit or of a unit below it, as LAYERS
says. LAYERS is the one statement of the allowed directions; docs/ARCHITECTURE.md
shows it (`--table` prints the Markdown rows the document must contain, and
tests/test_layers.py checks that it does).

    scripts/check-deps.py          # exit 1 and one line per upward include
    scripts/check-deps.py --table  # the allowed directions as Markdown rows

Tests and benchmarks (tests/, bench/) may include anything. An include that
names no file of the tree (a generated header such as onnx.pb-c.h) is not
checked. A data file that C is generated from (daemon/settings.toml) lists
the headers of that C under `includes`: they count as includes of the data
file's own folder."""
import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Units, most specific first: a file belongs to the first whose path prefix
# it has (kernels/op-desc.{h,c} are a unit of their own: the op descriptors
# sparse/ may use without the reference kernels).
UNITS = [
    ("op-desc", ("kernels/op-desc.h", "kernels/op-desc.c")),
    ("core", ("core/",)),
    ("kernels", ("kernels/",)),
    ("sparse", ("sparse/",)),
    ("backends/cpu", ("backends/cpu/",)),
    ("backends/hip", ("backends/hip/",)),
    ("backends/devices", ("backends/devices.",)),
    ("backends", ("backends/",)),
    ("proto", ("proto/",)),
    ("runtime", ("runtime/",)),
    ("daemon", ("daemon/",)),
    ("client", ("client/",)),
    ("tools", ("tools/",)),
]

# unit: (the units it may include besides itself, why). Bottom to top.
LAYERS = {
    "core": ((), "errors, limits, dtypes, checked sizes: depends on nothing"),
    "op-desc": (("core",), "operator descriptions shared by every kernel"),
    "kernels": (("op-desc", "core"), "reference kernels: the test oracle and last resort"),
    "sparse": (("op-desc", "core"), "sparsity analysis, formats, sparse CPU kernels"),
    "backends": (("op-desc", "core"), "the device interface: vtable, op descriptions, caps, wrappers"),
    "backends/cpu": (("backends", "kernels", "sparse", "op-desc", "core"),
                     "the CPU backend and its oneDNN wrappers"),
    "backends/hip": (("backends", "kernels", "sparse", "op-desc", "core"),
                     "the HIP backend, its kernels, emulator, plugin loader and rocSPARSE calls"),
    "backends/devices": (("backends/cpu", "backends/hip", "backends", "core"),
                         "the table of devices: a backend created by name"),
    "proto": (("core",), "the wire"),
    "runtime": (("backends/devices", "backends", "kernels", "sparse", "op-desc", "core"),
                "ONNX -> graph -> plan -> run, through the device interface only"),
    "daemon": (("runtime", "backends/devices", "backends", "proto", "core"),
               "the server (backends/devices: the start-up probe of --device)"),
    "client": (("proto", "core"), "libconvd: never the runtime"),
    "tools": (("client", "runtime", "sparse", "proto", "core"), "convctl, convbench, convd-run"),
}

# Includes allowed against LAYERS, each with its reason: only for files on
# their way out. A row whose file no longer exists is an error, so the row
# (and the forwarding header it names) goes with the file.
EXCEPTIONS = {}

SOURCES = re.compile(r"\.(c|h|cpp|hip|inc|toml)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes_of(path, text):
    """(included path, line) of each include of one file."""
    if path.endswith(".toml"):
        names = tomllib.loads(text).get("includes", [])
        return [(n, text.count("\n", 0, text.find(f'"{n}"')) + 1) for n in names]
    return [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in INCLUDE.finditer(text)]


def unit_of(path):
    for name, prefixes in UNITS:
        if path.startswith(prefixes):
            return name
    return None


def check(root=ROOT):
    """Returns the violations as 'file:line: message' strings."""
    bad = []
    for (f, inc), why in EXCEPTIONS.items():
        if not os.path.exists(os.path.join(root, f)):
            bad.append(f"scripts/check-deps.py: stale exception for {f} (gone): delete it, and {inc} "
                       f"if it only forwarded for that file")
    for _, prefixes in UNITS:
        for top in prefixes:
            d = os.path.join(root, top)
            if not os.path.isdir(d):
                continue
            for dp, _, files in os.walk(d):
                for fn in sorted(files):
                    if not SOURCES.search(fn):
                        continue
                    path = os.path.relpath(os.path.join(dp, fn), root)
                    src = unit_of(path)
                    text = open(os.path.join(root, path), errors="replace").read()
                    for inc, line in includes_of(path, text):
                        if not os.path.exists(os.path.join(root, inc)):
                            continue
                        dst = unit_of(inc)
                        if dst is None or dst == src or dst in LAYERS[src][0]:
                            continue
                        if (path, inc) in EXCEPTIONS:
                            continue
                        bad.append(f"{path}:{line}: {src} may not include {inc} ({dst}); "
                                   f"{src} may include: {', '.join(LAYERS[src][0]) or 'nothing'}")
    return sorted(set(bad))


def table():
    rows = ["| unit | may include | what it is |", "| --- | --- | --- |"]
    for name, (deps, why) in LAYERS.items():
        rows.append(f"| `{name}` | {', '.join(f'`{d}`' for d in deps) or 'nothing'} | {why} |")
    return "\n".join(rows)


def main(argv):
    if argv[1:] == ["--table"]:
        print(table())
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    bad = check()
    for b in bad:
        print(b)
    if bad:
        print(f"check-deps: {len(bad)} include(s) against the layers (scripts/check-deps.py LAYERS)")
        return 1
    print("check-deps: every include goes down")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
