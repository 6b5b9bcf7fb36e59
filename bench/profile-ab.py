#!/usr/bin/env python3
"""Two builds (or two settings) of convd-run on one model, layer by layer:
each run's CONVD_PROFILE table, the two in turn for --rounds rounds, then
per layer the minimum over the rounds, and their sums. For a machine whose
speed moves by 2x from one process to the next (docs/PERFORMANCE.md, "the
pool on bytes"), where medians of whole runs do not settle a 10% change.

    bench/profile-ab.py MODEL --a build-a/bin/convd-run --b build/bin/convd-run
                        [--a-env K=V,...] [--b-env K=V,...] [--threads 1] [--batch 1]
                        [--rounds 6] [--bench 10] [--min-diff 0.03]

Layers are matched by name: a layer in one plan only is listed as such.
"""
import argparse
import collections
import os
import re
import subprocess

LINE = re.compile(r"^profile:\s+\d+\s+(\S+)\s+(\S+)\s+\S+\s+([0-9.]+) ms")


def profile(binary, model, env, a):
    out = subprocess.run([binary, model, "--threads", str(a.threads), "--batch", str(a.batch), "--bench",
                          str(a.bench)], env=dict(os.environ, CONVD_PROFILE="1", **env), capture_output=True,
                         text=True, check=True)
    return [(m.group(1), float(m.group(3))) for m in map(LINE.match, out.stderr.splitlines()) if m]


def kv(s):
    return dict(x.split("=", 1) for x in s.split(",") if x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--a-env", type=kv, default={})
    ap.add_argument("--b-env", type=kv, default={})
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--bench", type=int, default=10)
    ap.add_argument("--min-diff", type=float, default=0.03, help="list layers whose minima differ by more (ms)")
    a = ap.parse_args()
    ms = {"a": collections.defaultdict(list), "b": collections.defaultdict(list)}
    order = []
    for _ in range(a.rounds):
        for side, binary, env in (("a", a.a, a.a_env), ("b", a.b, a.b_env)):
            for name, t in profile(binary, a.model, env, a):
                ms[side][name].append(t)
                if name not in order:
                    order.append(name)
    total = {"a": 0.0, "b": 0.0}
    print("| layer | a min ms | b min ms |\n|---|---|---|")
    for name in order:
        mins = {s: min(ms[s][name]) if ms[s][name] else None for s in ("a", "b")}
        for s in ("a", "b"):
            total[s] += mins[s] or 0.0
        if None in mins.values() or abs(mins["a"] - mins["b"]) > a.min_diff:
            cells = ["-" if mins[s] is None else f"{mins[s]:.3f}" for s in ("a", "b")]
            print(f"| {name} | {cells[0]} | {cells[1]} |")
    print(f"\nsum of per-layer minima over {a.rounds} rounds: a {total['a']:.3f} ms, b {total['b']:.3f} ms, "
          f"a/b {total['a'] / total['b']:.3f}")


if __name__ == "__main__":
    main()
