#!/usr/bin/env python3
"""f32 vs int8 conv on oneDNN (bench/dnnl-int8-layers.c) on ResNet-50's and
MobileNetV2's conv shapes, 1 thread, at several ISA caps and, with --alt, a
second oneDNN build of the same program (e.g. PyPI's oneDNN 2026.1).

Every configuration (library x ISA cap) runs once per round for each batch,
round-robin, so a noisy neighbour hits all of them alike; a configuration's
number for a layer is the median over rounds of the program's own median
(its methods are themselves interleaved per layer). Prints markdown tables.

    make bench
    make bench-onednn-alt ONEDNN_PREFIX=/path/to/venv     # optional, see bench/results/onednn-versions.md
    bench/dnnl-int8-layers.py [--rounds 3] [--batches 1 16] [--alt /path/to/venv] [--out FILE]

One thread: the process is pinned to core 0 (taskset) with OMP_NUM_THREADS=1;
oneDNN 2.6 (OpenMP) and the PyPI 3.x (TBB) both follow that.
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def configs(build, alt):
    base = os.path.join(ROOT, build, "bin", "dnnl-int8-layers")
    out = [("2.6 native", base, {}),
           ("2.6 AVX512_CORE", base, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}),
           ("2.6 AVX2", base, {"ONEDNN_MAX_CPU_ISA": "AVX2"})]
    if alt:
        # The PyPI build's CPU engine is a SYCL device: it needs the OpenCL CPU
        # runtime that came with it, which the ICD loader does not find alone.
        env = {"OCL_ICD_FILENAMES": os.path.join(alt, "lib", "libintelocl.so")}
        exe = base + "-alt"
        out += [("alt native", exe, env), ("alt AVX2", exe, dict(env, ONEDNN_MAX_CPU_ISA="AVX2"))]
    return out


def run(exe, env, batch, reps, min_ms):
    e = dict(os.environ, OMP_NUM_THREADS="1", **env)
    e.pop("ONEDNN_VERBOSE", None)
    p = subprocess.run(["taskset", "-c", "0", exe, "--csv", "--batch", str(batch), "--reps", str(reps),
                        "--min-ms", str(min_ms)], env=e, capture_output=True, text=True, check=True)
    version, rows = "", {}
    for line in p.stdout.splitlines():
        if line.startswith("# oneDNN"):
            version = line[2:]
        elif line and not line.startswith("#"):
            m, layer, b, gop, f32, i8, i8b, impl_f, impl_i, impl_q = line.split(",")
            rows[(m, layer)] = (float(gop), float(f32), float(i8), float(i8b), impl_f, impl_i)
    return version, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--reps", type=int, default=3, help="interleaved samples per layer inside one run")
    ap.add_argument("--min-ms", type=float, default=5)
    ap.add_argument("--alt", help="prefix of a second oneDNN (include/, lib/) built into dnnl-int8-layers-alt")
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"))
    ap.add_argument("--out", help="also write the tables to this file")
    a = ap.parse_args()
    cfgs = configs(a.build, a.alt)
    # samples[(cfg, batch)][(model, layer)] = list of (f32, i8, i8b) per round
    samples = collections.defaultdict(lambda: collections.defaultdict(list))
    info, versions = {}, {}
    t0 = time.time()
    for r in range(a.rounds):
        for b in a.batches:
            for name, exe, env in cfgs:
                v, rows = run(exe, env, b, a.reps, a.min_ms)
                versions[name] = v
                for key, (gop, f32, i8, i8b, impl_f, impl_i) in rows.items():
                    samples[(name, b)][key].append((f32, i8, i8b))
                    info[(name, b, key)] = (gop, impl_f, impl_i)
        print(f"round {r + 1}/{a.rounds} done ({time.time() - t0:.0f} s)", file=sys.stderr)

    lines = []
    say = lines.append
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    say(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {cpu}, 1 thread (taskset -c 0), "
        f"rounds={a.rounds} reps={a.reps} min-ms={a.min_ms}")
    for name, _, _ in cfgs:
        say(f"# {name}: {versions.get(name, '?')}")
    say("")
    say("Ratios are f32 time / int8 time (above 1: int8 wins). 'core' is the int8 conv primitive alone "
        "(u8 nhwc in and out); '+bnd' adds the boundary reorders the product's op runs (f32 blocked -> u8 nhwc, "
        "u8 nhwc -> f32 blocked).")
    names = [c[0] for c in cfgs]
    for b in a.batches:
        say("")
        say(f"## batch {b}")
        say("")
        say("| model | layer | GOP | f32 ms (2.6 native) | " + " | ".join(f"{n} core / +bnd" for n in names) + " |")
        say("|---|---|---|---|" + "---|" * len(names))
        keys = list(samples[(names[0], b)].keys())
        totals = {n: [0.0, 0.0, 0.0] for n in names}
        for key in keys:
            cells = []
            for n in names:
                s = samples[(n, b)][key]
                f32, i8, i8b = (statistics.median(x[i] for x in s) for i in range(3))
                for i, v in enumerate((f32, i8, i8b)):
                    totals[n][i] += v
                cells.append(f"{f32 / i8:.2f} / {f32 / i8b:.2f}")
            gop = info[(names[0], b, key)][0]
            f32n = statistics.median(x[0] for x in samples[(names[0], b)][key])
            say(f"| {key[0]} | {key[1]} | {gop:.3f} | {f32n:.3f} | " + " | ".join(cells) + " |")
        say("| all | sum of the layers | | {:.2f} | ".format(totals[names[0]][0]) +
            " | ".join(f"{t[0] / t[1]:.2f} / {t[0] / t[2]:.2f}" for t in totals.values()) + " |")
        say("")
        say(f"Sums over the layers, ms (batch {b}): " + "; ".join(
            f"{n}: f32 {t[0]:.1f}, int8 {t[1]:.1f}, int8+bnd {t[2]:.1f}" for n, t in totals.items()))
        for n in names:
            impls = collections.Counter(info[(n, b, k)][2] for k in keys)
            say(f"- int8 kernels, {n}: " + ", ".join(f"{i} x{c}" for i, c in impls.most_common()))
        if a.alt:
            for isa in ("native", "AVX2"):
                base, alt = totals.get(f"2.6 {isa}"), totals.get(f"alt {isa}")
                if base and alt:
                    say(f"- alt / 2.6 time, {isa}, batch {b}: f32 {alt[0] / base[0]:.2f}, int8 core {alt[1] / base[1]:.2f}, "
                        f"int8+bnd {alt[2] / base[2]:.2f} (below 1: alt faster)")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
