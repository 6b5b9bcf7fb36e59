#!/usr/bin/env python3
"""How long the daemon's compute threads should spin between layers: the
round trip at concurrency 1 for several GOMP_SPINCOUNT values and
OMP_WAIT_POLICY=passive, on a quiet machine and with other processes keeping
cores busy, in one interleaved run (docs/OPERATIONS.md, "Compute threads").

    bench/wait-policy.py [--models mobilenetv2,resnet50-u90] [--spins 1000,3000,10000,30000]
                         [--busy 0,1] [--threads all] [--rounds 3] [--duration 4]

Every cell: a fresh `convd --threads T` (its other settings at their
defaults) with the policy in its environment, one convbench burst
(concurrency 1, --duration s after 1 s): the client's p50 and p99 and the
daemon's own compute p50. --busy N: N shell busy loops (`while :; do :;
done`) run for the whole cell, as other work on a shared host would. Also
measured per spin count: the CPU time of the process over the 1 s after a
parallel region (libgomp's spin after a request; no request follows).
The table shows the median over rounds; the order of the policies rotates
every round.
"""
import argparse
import importlib.util
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
spec = importlib.util.spec_from_file_location("all_cores", ROOT / "bench" / "all-cores.py")
ac = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ac)

SPIN_PROBE = r"""
#include <omp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
static double cpu(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}
int main(void) {
    volatile double x = 0;
#pragma omp parallel num_threads(2)
    x += 1;
    double c0 = cpu();
#pragma omp parallel num_threads(2)
    x += 1;
    sleep(1);
    printf("%.3f\n", (cpu() - c0) * 1e3);
    return 0;
}
"""


def spin_ms(probe, policy):
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("GOMP_SPINCOUNT", None)
    env.update(policy)
    return float(subprocess.run([probe], capture_output=True, text=True, env=env, check=True).stdout)


def policies(spins):
    out = [("passive", {"OMP_WAIT_POLICY": "passive"})]
    out += [(f"spin {s}", {"GOMP_SPINCOUNT": str(s)}) for s in spins]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mobilenetv2,resnet50-u90")
    ap.add_argument("--spins", default="1000,3000,10000,30000")
    ap.add_argument("--busy", default="0,1", help="busy loops beside the daemon, a list")
    ap.add_argument("--threads", default="all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--cache", help="model cache (default: bench/benchmodels.py's)")
    a = ap.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    threads = cores if a.threads == "all" else int(a.threads)
    names = a.models.split(",")
    pols = policies([int(s) for s in a.spins.split(",")])
    busy = [int(b) for b in a.busy.split(",")]
    import benchmodels
    files = ac.anchors.model_files(names, benchmodels.cache_dir(a.cache))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="convd-wp"))
    # Copies: a rebuild of the tree during the run cannot swap them.
    bindir = tmp / "bin"
    bindir.mkdir()
    for b in ("convd", "convctl", "convbench"):
        shutil.copy2(ROOT / "build" / "bin" / b, bindir / b)
    probe = tmp / "spin-probe"
    (tmp / "p.c").write_text(SPIN_PROBE)
    subprocess.run(["cc", "-O2", "-fopenmp", str(tmp / "p.c"), "-o", str(probe)], check=True)
    dirs = {}
    for n in names:
        dirs[n] = tmp / n
        dirs[n].mkdir()
        shutil.copy(files[n], dirs[n] / f"{n}.onnx")
    res = {}
    load0 = os.getloadavg()[0]
    for r in range(a.rounds):
        order = pols[r % len(pols):] + pols[:r % len(pols)]
        for b in busy:
            hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(b)]
            try:
                for n in names:
                    for label, env in order:
                        d = ac.Daemon(bindir, dirs[n], ["--threads", threads], env)
                        try:
                            d.wait_model(n)
                            out = ac.convbench(bindir, d.socket, n, 1, a.duration, 300)
                            comp = d.stats()["models"][n]["compute_us"]["p50"] / 1e3
                        finally:
                            d.close()
                        res.setdefault((n, b, label), []).append(
                            (out["latency_ms"]["p50"], out["latency_ms"]["p99"], comp))
                        ac.log(f"round {r + 1} {n} busy {b} {label}: p50 {out['latency_ms']['p50']:.2f} ms")
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    spin = {label: spin_ms(probe, env) for label, env in pols}
    ci = ac.anchors.cpu_info()
    isa = "avx512f" if ci["avx512f"] else "avx2" if ci["avx2"] else "scalar"
    print(f"convd {ac.anchors.git_rev()}, {ci['model']} ({isa}, no cap), {cores} cores, --threads {threads}; "
          f"load average {load0:.2f} before, {os.getloadavg()[0]:.2f} after; {a.rounds} rounds, "
          f"convbench concurrency 1, {a.duration} s per cell\n")
    print("| model | busy loops | policy | p50 ms | p99 ms | daemon compute p50 ms | CPU after a region (1 s) |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        for b in busy:
            for label, _ in pols:
                v = res[(n, b, label)]
                p50, p99, comp = (statistics.median(x[i] for x in v) for i in range(3))
                print(f"| {n} | {b} | {label} | {p50:.2f} | {p99:.2f} | {comp:.2f} | {spin[label]:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
