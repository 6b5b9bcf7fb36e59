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
file's own folder.

Within a folder of CIRCLE_FREE, the includes must also form no circle: a
file and its header are one node (daemon/conn.c and daemon/conn.h are
"daemon/conn"), and a circle of nodes is reported unless all of its nodes
are in the folder's allowed set (the connection's own files, which are one
piece split in two)."""
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

# Folders whose includes may not go round in a circle, each with the nodes
# (path without .c/.h) that may form one among themselves, and why.
CIRCLE_FREE = {
    "daemon/": (frozenset({"daemon/conn", "daemon/conn-respond", "daemon/conn-internal"}),
                "the connection is transport only: the server hands it a dispatcher and hooks "
                "(daemon/conn-hub.h); handlers count requests in daemon/request.c"),
}

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


def node_of(path):
    """A file's node in the circle check: its path without .c/.h."""
    return re.sub(r"\.(c|h)$", "", path)


def strongly_connected(graph):
    """The strongly connected parts of graph {node: set(node)} (Tarjan's,
    iterative), each a sorted list; only those of two nodes or more."""
    index, low, on_stack, stack, parts = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                part = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    part.append(w)
                    if w == v:
                        break
                if len(part) > 1:
                    parts.append(sorted(part))
    return parts


def circles(root=ROOT):
    """The include circles of the CIRCLE_FREE folders, as messages."""
    bad = []
    for folder, (allowed, why) in CIRCLE_FREE.items():
        d = os.path.join(root, folder)
        if not os.path.isdir(d):
            continue
        graph = {}
        for fn in sorted(os.listdir(d)):
            if not SOURCES.search(fn):
                continue
            path = folder + fn
            text = open(os.path.join(root, path), errors="replace").read()
            src = node_of(path)
            graph.setdefault(src, set())
            for inc, _ in includes_of(path, text):
                if inc.startswith(folder) and "/" not in inc[len(folder):] and node_of(inc) != src:
                    graph[src].add(node_of(inc))
        for part in strongly_connected(graph):
            if set(part) <= allowed:
                continue
            ties = [f"{a} -> {b}" for a in part for b in sorted(graph[a]) if b in part]
            bad.append(f"{folder}: include circle of {len(part)} files: {', '.join(part)} "
                       f"({'; '.join(ties)}); only {', '.join(sorted(allowed))} may form one: {why}")
    return bad


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
    loops = circles()
    for b in bad + loops:
        print(b)
    if bad:
        print(f"check-deps: {len(bad)} include(s) against the layers (scripts/check-deps.py LAYERS)")
    if loops:
        print(f"check-deps: {len(loops)} include circle(s) (scripts/check-deps.py CIRCLE_FREE)")
    if bad or loops:
        return 1
    print("check-deps: every include goes down, and no folder of CIRCLE_FREE goes round")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
