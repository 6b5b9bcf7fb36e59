#!/usr/bin/env python3
"""convd, onnxruntime and DeepSparse 1.8.0 at several thread counts and
concurrencies, in one interleaved run: latency and throughput on all cores
(docs/PERFORMANCE.md, "All cores").

    bench/setup-deepsparse                  # once: DeepSparse's own venv, outside the checkout
    bench/all-cores.py [--models mobilenetv2,resnet50,resnet50-u90,resnet18-u90]
                       [--threads 1,2,all] [--concurrency 1,16] [--rounds 3] [--duration 5]
                       [--iters 20] [--warmup 2] [--isa native|avx2] [--json FILE] [--write]
    bench/all-cores.py --sweep              # concurrency 16: the daemon's --workers x --threads
    bench/all-cores.py --idle [--idle-seconds 30]   # an idle daemon's CPU use
    bench/all-cores.py --quick --models mobilenetv2 --threads 1,2   # smoke run (1 round, 1 s)
    bench/all-cores.py --from-json FILE [--write]   # the tables of an earlier --json

Models: the files of bench/benchmodels.py under the names bench/anchors.py
uses (resnet50, mobilenetv2, resnet50-u90, resnet18-u90, ...: 224x224, random
weights, pruned by `convctl prune`). Every engine runs batch 1, at the same
thread count T (--threads; `all` = the CPUs of the affinity mask):

  convd-run    build/bin/convd-run FILE --bench N --warmup W --threads T --json,
               concurrency 1 only (it has one caller). It prints the median and
               the p99 of its N runs (with --iters 20, the p99 is the slowest run).
  daemon       build/bin/convd --socket S --models DIR --threads T, every other
               setting its default (--workers 2 today), a fresh daemon per
               measurement; DIR holds a copy of the file. Load from the C client
               build/bin/convbench --concurrency C --duration D --warmup 1 --json
               (closed loop; p50/p99 of its round trips, its throughput), and the
               daemon's own compute_us p50 from `convctl stats --json` (over the
               warm-up second too: the histogram cannot be reset).
  onnxruntime  anchors.py's Ort with intra_op_num_threads=T (inter_op 1,
               ORT_ENABLE_ALL, sequential); C = 1: N timed run() calls after W
               warm-ups; C > 1: C Python threads calling run() in a closed loop
               on one shared session for D seconds after 1 s (run() releases the
               GIL). Every run() computes on its caller's thread plus the shared
               intra-op pool, so the callers are pinned to T CPUs
               (sched_setaffinity) to keep onnxruntime on T cores.
  DeepSparse   anchors.py's worker in the venv of bench/setup-deepsparse,
               compile_model(FILE, batch_size=1, num_cores=T); C = 1: N timed
               run() calls of the default (single_stream) engine; C > 1: an
               engine compiled with scheduler="multi_stream" (num_streams left to
               DeepSparse) driven by C threads of the worker for D seconds. If
               multi_stream does not compile, the default scheduler, and the
               table says so.

Method: R rounds (--rounds); in each, for every thread count and model, the
engines run in an order that rotates every round, each at every concurrency.
The tables show the median over rounds of each round's p50, p99 and
throughput. A header names the CPU, the cores, the ISA each engine reported
(convd-run's and the daemon's cpu blocks, DeepSparse's cpu_architecture() and
banner), convd's git rev and the load average before and after.

--sweep: concurrency 16 only, the daemon at --workers {1, 2, cores} x
--threads {1, cores} and at its defaults, interleaved likewise; prints the
best setting and the defaults' throughput as a share of it.

--idle: a daemon at its defaults, warmed by one convbench burst, then its CPU
use (utime + stime of /proc/PID/stat) over --idle-seconds, in % of one core.

--isa avx2 caps as bench/anchors.py does: ONEDNN_MAX_CPU_ISA=AVX2 and
CONVD_MAX_ISA=avx2 for convd (the daemon does not read CONVD_MAX_ISA: it gets
--max-isa avx2), NM_ARCH=avx2 for DeepSparse; onnxruntime cannot be capped.
convd runs with its own wait policy: the daemon and convd-run set
GOMP_SPINCOUNT themselves (runtime/omp-env.c); neither gets OMP_WAIT_POLICY
(unless the caller's environment sets it).

--write replaces the section "## All cores" (the thread x concurrency tables),
"## All cores: daemon settings" (--sweep) or "## All cores: idle" (--idle) of
docs/PERFORMANCE.md, re-read just before writing, or appends it.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import anchors  # noqa: E402  (its DeepSparse worker, Ort, model files, machine info)

DEFAULT_MODELS = ("mobilenetv2", "resnet50", "resnet50-u90", "resnet18-u90")
ENGINES = ("inproc", "daemon", "ort", "deepsparse")
LABEL = {"inproc": "convd-run", "daemon": "convd daemon", "ort": "onnxruntime", "deepsparse": "DeepSparse"}
SWEEP_CONCURRENCY = 16
TITLES = {"matrix": "## All cores", "sweep": "## All cores: daemon settings", "idle": "## All cores: idle"}


def log(msg):
    print(f"[all-cores] {msg}", file=sys.stderr, flush=True)


# ---- timing loops (also run inside the DeepSparse worker) ----------------------------

def timed_loop(fn, iters, warmup):
    """Milliseconds of each of `iters` calls of fn() after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return ts


def closed_loop(fn, concurrency, duration, warmup):
    """`concurrency` threads each calling fn() back to back, starting calls for
    warmup + duration seconds; the calls that end inside the last `duration`
    seconds count (as convbench counts them). Returns {"ms": their latencies,
    "throughput": their number per second}."""
    start = threading.Barrier(concurrency + 1)
    lat = [[] for _ in range(concurrency)]
    box = {}

    def worker(out):
        start.wait()
        t_begin, t_end = box["begin"], box["end"]
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                return
            fn()
            t1 = time.perf_counter()
            if t_begin <= t1 <= t_end:
                out.append((t1 - t0) * 1e3)

    threads = [threading.Thread(target=worker, args=(lat[i],), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    now = time.perf_counter()
    box["begin"], box["end"] = now + warmup, now + warmup + duration
    start.wait()
    for t in threads:
        t.join()
    ms = [v for lst in lat for v in lst]
    return {"ms": ms, "throughput": len(ms) / duration}


def summary(ms, throughput=None):
    """p50, p99 (ms) and throughput (1/s; default: calls back to back) of latencies."""
    if not ms:
        return {"error": "no call completed"}
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "thr": float(throughput if throughput is not None else 1e3 * len(ms) / sum(ms)), "n": len(ms)}


def worker_commands():
    """The commands all-cores adds to anchors.py's DeepSparse worker."""
    inputs = {}

    def x_of(req):
        if req["input"] not in inputs:
            inputs[req["input"]] = np.load(req["input"])
        return inputs[req["input"]]

    def times(req, engines):
        eng, x = engines[req["key"]], x_of(req)
        return summary(timed_loop(lambda: eng.run([x]), req["iters"], req["warmup"]))

    def closed(req, engines):
        eng, x = engines[req["key"]], x_of(req)
        r = closed_loop(lambda: eng.run([x]), req["concurrency"], req["duration"], req["warmup_s"])
        return summary(r["ms"], r["throughput"])

    return {"times": times, "closed_loop": closed}


# ---- convd -------------------------------------------------------------------------

def daemon_env(env):
    """tests/support/daemon.py's environment without its OMP_WAIT_POLICY:
    the daemon chooses its own wait policy (GOMP_SPINCOUNT, runtime/omp-env.c)."""
    from tests.support.daemon import process_env
    e = process_env(env)
    if "OMP_WAIT_POLICY" not in env and "OMP_WAIT_POLICY" not in os.environ:
        e.pop("OMP_WAIT_POLICY", None)
    return e


class Daemon:
    """A convd on a temporary socket serving one model folder: the binaries
    copied at the start of the run, tests/support/daemon.py's environment."""

    def __init__(self, bindir, models_dir, args, env, timeout=120):
        self.bindir, self.timeout = bindir, timeout
        self.dir = tempfile.mkdtemp(prefix="convd-ac")
        self.socket = os.path.join(self.dir, "s")
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen([str(bindir / "convd"), "--socket", self.socket, "--models", str(models_dir),
                                      *map(str, args)], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=daemon_env(env))

    def ctl(self, *args):
        r = subprocess.run([str(self.bindir / "convctl"), "--socket", self.socket, *args],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr

    def wait_model(self, name):
        """Returns when `convctl models` lists `name`; raises when convd exits or the deadline passes."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"convd exited with {self.proc.returncode}:\n{self.text()[-2000:]}")
            rc, out, _ = self.ctl("--json", "models")
            if rc == 0 and any(m["name"] == name for m in json.loads(out)["models"]):
                return
            time.sleep(0.05)
        raise RuntimeError(f"convd did not load {name} in {self.timeout} s:\n{self.text()[-2000:]}")

    def stats(self):
        rc, out, err = self.ctl("--json", "stats")
        if rc:
            raise RuntimeError(f"convctl stats: {err}")
        return json.loads(out)

    def cpu_seconds(self):
        """utime + stime of the daemon so far, seconds."""
        fields = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def text(self):
        return pathlib.Path(self.dir, "log").read_text(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def convbench(bindir, sock, model, concurrency, duration, timeout):
    cmd = [str(bindir / "convbench"), "--socket", sock, "--model", model, "--concurrency", str(concurrency),
           "--duration", str(duration), "--warmup", "1", "--json", "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"convbench failed ({r.returncode}): {r.stderr[-1000:]}")
    return json.loads(r.stdout)


def daemon_burst(ctx, model, args, concurrency, duration):
    """A fresh daemon with `args` serving `model`, one convbench burst: the
    client's p50/p99/throughput, the daemon's compute p50 and mean batch."""
    d = Daemon(ctx["bindir"], ctx["dirs"][model], args, ctx["caps"]["convd"])
    try:
        d.wait_model(model)
        out = convbench(ctx["bindir"], d.socket, model, concurrency, duration, ctx["timeout"])
        s = d.stats()
        m = s["models"][model]
        r = {"p50": out["latency_ms"]["p50"], "p99": out["latency_ms"]["p99"], "thr": out["throughput_rps"],
             "n": out["requests"]["ok"], "errors": out["requests"]["errors"],
             "compute_p50": m["compute_us"]["p50"] / 1e3, "batch_mean": m["batch_size"]["mean"],
             "workers": s["settings"]["workers"], "threads": s["settings"]["threads"]}
        ctx.setdefault("daemon_cpu", s["cpu"])
        return r
    finally:
        d.close()


def inproc(ctx, model, threads):
    out = anchors.convd_cmd(ctx["bindir"] / "convd-run", ctx["files"][model], "--bench", ctx["iters"],
                            "--warmup", ctx["warmup"], "--json", env=ctx["caps"]["convd"], timeout=ctx["timeout"],
                            threads=threads, passive=False)
    j = json.loads(out.stdout)
    ctx.setdefault("inproc_cpu", j["cpu"])
    b = j["bench"]
    return {"p50": b["median_ms"], "p99": b["p99_ms"], "thr": 1e3 / b["mean_ms"], "n": b["runs"]}


def daemon_args(ctx, threads, workers=None):
    args = [] if threads is None else ["--threads", threads]
    if workers is not None:
        args += ["--workers", workers]
    if ctx["isa"] != "native":
        args += ["--max-isa", ctx["isa"]]
    return args


# ---- the run -----------------------------------------------------------------------

def measure(ctx, engine, model, threads, c):
    """One measurement (dict with p50, p99, thr, ...) or {"error": ...}."""
    try:
        if engine == "inproc":
            return inproc(ctx, model, threads)
        if engine == "daemon":
            return daemon_burst(ctx, model, daemon_args(ctx, threads), c, ctx["duration"])
        if engine == "ort":
            sess, x = ctx["ort"][(model, threads)], ctx["xa"]
            if c == 1:
                return summary(timed_loop(lambda: sess.run(x), ctx["iters"], ctx["warmup"]))
            # Each run() computes on its caller's thread too: the callers are
            # pinned to T CPUs (they inherit this thread's mask), so that
            # onnxruntime uses T cores like the other engines.
            mask = os.sched_getaffinity(0)
            os.sched_setaffinity(0, sorted(mask)[:threads])
            try:
                r = closed_loop(lambda: sess.run(x), c, ctx["duration"], 1.0)
            finally:
                os.sched_setaffinity(0, mask)
            return summary(r["ms"], r["throughput"])
        ds = ctx["ds"]
        if c == 1:
            return ds.call(cmd="times", key=ds_key(model, threads, False), input=str(ctx["x"]),
                           iters=ctx["iters"], warmup=ctx["warmup"])
        return ds.call(cmd="closed_loop", key=ds_key(model, threads, True), input=str(ctx["x"]),
                       concurrency=c, duration=ctx["duration"], warmup_s=1.0)
    except Exception as e:  # one failed cell, the run goes on
        log(f"{LABEL[engine]} {model} T={threads} C={c}: {type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def ds_key(model, threads, multi):
    return f"{model}|{threads}|{'multi' if multi else 'single'}"


def setup(a, names, threads_list, need_engines=True):
    """Model files and their daemon folders, binaries copied, the input, ORT
    sessions and DeepSparse engines: the context of every measurement."""
    from tests.support import paths
    import benchmodels
    caps = anchors.CAPS[a.isa]
    files = anchors.model_files(names, benchmodels.cache_dir(a.cache))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="convd-allcores-"))
    bindir = tmp / "bin"
    bindir.mkdir()
    for b in ("convd", "convd-run", "convctl", "convbench"):  # copies: a rebuild cannot swap them mid-run
        shutil.copy2(paths.binary(b), bindir / b)
    dirs = {}
    for n in names:  # the daemon refuses symlinks that leave its folder: a copy
        dirs[n] = tmp / "models" / n
        dirs[n].mkdir(parents=True)
        shutil.copy2(files[n], dirs[n] / f"{n}.onnx")
    x = tmp / "x.npy"
    np.save(x, np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
    ctx = {"tmp": tmp, "bindir": bindir, "files": files, "dirs": dirs, "caps": caps, "isa": a.isa,
           "x": x, "xa": np.load(x), "iters": a.iters, "warmup": a.warmup, "duration": a.duration,
           "timeout": a.timeout, "ds": None, "ort": {}, "notes": [], "models": {}}
    r = subprocess.run([str(bindir / "convd"), "--version"], capture_output=True, text=True)
    ctx["convd_version"] = r.stdout.splitlines()[0] if r.stdout else "?"
    if not need_engines:
        return ctx
    import onnxruntime
    ctx["ort_version"] = onnxruntime.__version__
    ctx["ds"] = anchors.DeepSparse(anchors.deepsparse_python(a.deepsparse_python), caps["deepsparse"], a.timeout,
                                   script=__file__)
    ctx["ds_info"] = ctx["ds"].call(cmd="info")
    multi = any(c > 1 for c in a.conc)
    for n in names:
        t0 = time.perf_counter()
        info = ctx["models"][n] = {"file": files[n].name, "ds_scheduler": {}, "ds_streams": {}}
        for T in threads_list:
            ctx["ort"][(n, T)] = anchors.Ort(files[n], threads=T)
            ld = ctx["ds"].call(cmd="load", path=str(files[n]), key=ds_key(n, T, False), num_cores=T)
            if ld["banner"]:
                ctx["ds_info"]["banner"] = ld["banner"].strip()
            if multi:
                try:
                    ld = ctx["ds"].call(cmd="load", path=str(files[n]), key=ds_key(n, T, True), num_cores=T,
                                        scheduler="multi_stream")
                except RuntimeError as e:
                    ctx["notes"].append(f"DeepSparse {n} T={T}: multi_stream failed ({e}); the default scheduler "
                                        "ran the concurrent loops")
                    log(ctx["notes"][-1])
                    ld = ctx["ds"].call(cmd="load", path=str(files[n]), key=ds_key(n, T, True), num_cores=T)
                info["ds_scheduler"][str(T)], info["ds_streams"][str(T)] = ld["scheduler"], ld["num_streams"]
        # Correctness on one input at the first thread count: convd-run and DeepSparse against ORT.
        T = threads_list[0]
        ref = ctx["ort"][(n, T)].run(ctx["xa"])
        anchors.convd_cmd(bindir / "convd-run", files[n], "--input", x, "--output", tmp / "convd.npy",
                          env=caps["convd"], timeout=a.timeout, threads=T)
        ctx["ds"].call(cmd="run", path=str(files[n]), key=ds_key(n, T, False), input=str(x),
                       output=str(tmp / "ds.npy"))
        info["err"] = {"inproc": anchors.rel_err(np.load(tmp / "convd.npy"), ref),
                       "deepsparse": anchors.rel_err(np.load(tmp / "ds.npy"), ref)}
        log(f"{n}: set up in {time.perf_counter() - t0:.1f} s; max rel. error vs ORT: convd "
            f"{info['err']['inproc']:.1e}, DeepSparse {info['err']['deepsparse']:.1e}")
    return ctx


def close(ctx):
    if ctx.get("ds"):
        ctx["ds"].close()
    shutil.rmtree(ctx["tmp"], ignore_errors=True)


def header_res(a, ctx, mode):
    return {"mode": mode, "isa": a.isa, "caps": ctx["caps"], "cpu": anchors.cpu_info(),
            "affinity": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "convd_rev": anchors.git_rev(), "convd_version": ctx["convd_version"], "load_start": os.getloadavg(),
            "rounds": a.rounds, "duration": a.duration, "iters": a.iters, "warmup": a.warmup,
            "ort_version": ctx.get("ort_version"), "deepsparse": ctx.get("ds_info"), "quick": a.quick}


def run_matrix(a, names, threads_list):
    ctx = setup(a, names, threads_list)
    try:
        res = header_res(a, ctx, "matrix")
        res.update(threads=threads_list, concurrency=a.conc, models=ctx["models"], notes=ctx["notes"])
        cells = res["cells"] = {str(T): {n: {str(c): {e: [] for e in ENGINES} for c in a.conc} for n in names}
                                for T in threads_list}
        log(f"load average {res['load_start'][0]:.2f}; {len(names)} models x threads {threads_list} x "
            f"concurrency {a.conc} x {a.rounds} rounds")
        order, t_start = list(ENGINES), time.monotonic()
        for r in range(a.rounds):
            for T in threads_list:
                for n in names:
                    for e in order:
                        for c in a.conc:
                            if e == "inproc" and c != 1:
                                continue
                            cells[str(T)][n][str(c)][e].append(measure(ctx, e, n, T, c))
            log(f"round {r + 1}/{a.rounds} done ({time.monotonic() - t_start:.0f} s, load {os.getloadavg()[0]:.2f})")
            order = order[1:] + order[:1]
        res["load_end"] = os.getloadavg()
        res["inproc_cpu"], res["daemon_cpu"] = ctx.get("inproc_cpu"), ctx.get("daemon_cpu")
        return res
    finally:
        close(ctx)


def sweep_configs(cores, extra=()):
    """(label, workers, threads, more daemon args): the defaults, workers x
    threads, and each of `extra` (daemon flags on top of the defaults)."""
    configs = [("default", None, None, [])]
    for w in sorted({1, 2, cores}):
        for t in sorted({1, cores}):
            configs.append((f"--workers {w} --threads {t}", w, t, []))
    configs += [(e, None, None, e.split()) for e in extra]
    return configs


def run_sweep(a, names):
    cores = len(os.sched_getaffinity(0))
    ctx = setup(a, names, [cores], need_engines=False)
    try:
        res = header_res(a, ctx, "sweep")
        configs = sweep_configs(cores, a.sweep_extra)
        res.update(concurrency=[SWEEP_CONCURRENCY], configs=[c[0] for c in configs], notes=[], sweep_extra=a.sweep_extra,
                   cells={n: {c[0]: [] for c in configs} for n in names})
        log(f"load average {res['load_start'][0]:.2f}; sweep of {len(configs)} daemon settings x {len(names)} models "
            f"x {a.rounds} rounds, concurrency {SWEEP_CONCURRENCY}")
        order = list(configs)
        for r in range(a.rounds):
            for n in names:
                for label, w, t, more in order:
                    try:
                        m = daemon_burst(ctx, n, daemon_args(ctx, t, w) + more, SWEEP_CONCURRENCY, a.duration)
                    except Exception as e:
                        log(f"{label} {n}: {e}")
                        m = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    res["cells"][n][label].append(m)
            log(f"round {r + 1}/{a.rounds} done (load {os.getloadavg()[0]:.2f})")
            order = order[1:] + order[:1]
        res["load_end"] = os.getloadavg()
        res["daemon_cpu"] = ctx.get("daemon_cpu")
        return res
    finally:
        close(ctx)


def run_idle(a, names):
    ctx = setup(a, names[:1], [], need_engines=False)
    n = names[0]
    try:
        res = header_res(a, ctx, "idle")
        d = Daemon(ctx["bindir"], ctx["dirs"][n], daemon_args(ctx, None), ctx["caps"]["convd"])
        try:
            d.wait_model(n)
            burst = convbench(ctx["bindir"], d.socket, n, SWEEP_CONCURRENCY, a.duration, a.timeout)
            time.sleep(0.5)  # the burst's last replies and the client's exit
            c0, t0 = d.cpu_seconds(), time.monotonic()
            time.sleep(a.idle_seconds)
            c1, t1 = d.cpu_seconds(), time.monotonic()
            s = d.stats()
            threads = next(int(line.split()[1]) for line in
                           pathlib.Path(f"/proc/{d.proc.pid}/status").read_text().splitlines()
                           if line.startswith("Threads:"))
        finally:
            d.close()
        res.update(model=n, burst_requests=burst["requests"]["ok"], idle_s=t1 - t0, cpu_s=c1 - c0,
                   cpu_pct=100 * (c1 - c0) / (t1 - t0), os_threads=threads, workers=s["settings"]["workers"],
                   threads=s["settings"]["threads"], spin_us=s["settings"]["worker-spin-us"], daemon_cpu=s["cpu"],
                   load_end=os.getloadavg(), notes=[])
        return res
    finally:
        close(ctx)


# ---- the tables --------------------------------------------------------------------

def med(rounds, key):
    vals = [r[key] for r in rounds if key in r and r[key] is not None]
    return float(np.median(vals)) if vals else None


def errors_of(rounds):
    return [r["error"] for r in rounds if "error" in r]


def fmt(v, digits=3):
    if v is None:
        return "n/a"
    return f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:.0f}"


def cell(rounds):
    """"p50 / p99 / thr" of the round medians, or n/a."""
    if rounds is None:
        return "—"
    if not any("p50" in r for r in rounds):
        return "n/a"
    return f"{fmt(med(rounds, 'p50'))} / {fmt(med(rounds, 'p99'))} / {fmt(med(rounds, 'thr'))}"


def header(res):
    cpu, ds = res["cpu"], res.get("deepsparse") or {}
    la, lb = res["load_start"], res.get("load_end") or res["load_start"]
    ic, dc = res.get("inproc_cpu"), res.get("daemon_cpu")
    isa = [f"`{res['convd_version']}`"]
    if ic:
        isa.append(f"convd-run: kernels {ic['kernels_isa']}{' (capped)' if ic['kernels_capped'] else ''}, "
                   f"oneDNN {ic['dnnl_isa']}, layout {ic['layout']}")
    if dc:
        isa.append(f"daemon: kernels {dc['kernels_isa']}{' (capped)' if dc['kernels_capped'] else ''}, "
                   f"oneDNN {dc['dnnl_isa']}, layout {dc['layout']}")
    if ds:
        banner = (re.search(r"\(system=[^)]*\)", ds.get("banner") or "") or ["?"])[0]
        isa.append(f"DeepSparse {ds.get('version')}: cpu_architecture() `{ds.get('isa')}`, "
                   f"binaries `{ds.get('binaries')}`, banner `{banner}`")
    if res.get("ort_version"):
        isa.append(f"onnxruntime {res['ort_version']}: MLAS by CPUID (no cap)")
    caps = ("none" if res["isa"] == "native" else
            " ".join(f"{k}={v}" for k, v in res["caps"]["convd"].items()) + " and --max-isa "
            f"{res['isa']} (daemon) for convd, " + " ".join(f"{k}={v}" for k, v in res["caps"]["deepsparse"].items())
            + " for DeepSparse, onnxruntime uncapped")
    return (f"CPU: {cpu['model']}, {cpu['cores']} cores ({res['affinity']} in the affinity mask); avx512f: "
            f"{'yes' if cpu['avx512f'] else 'no'}. ISA caps (--isa {res['isa']}): {caps}. At run time: "
            f"{'; '.join(isa)}. convd {res['convd_rev']}, measured {res['date']}; load average "
            f"{la[0]:.2f} before, {lb[0]:.2f} after.")


def command(res):
    cmd = "bench/all-cores.py"
    if res["mode"] != "matrix":
        cmd += f" --{res['mode']}"
    if res["isa"] != "native":
        cmd += f" --isa {res['isa']}"
    if res.get("quick"):
        cmd += " --quick"
    for e in res.get("sweep_extra", []):
        cmd += f" --sweep-extra '{e}'"
    return cmd


def markdown_matrix(res):
    out = [f"    {command(res)} --models {','.join(next(iter(res['cells'].values())))} "
           f"--threads {','.join(res['cells'])} --concurrency {','.join(map(str, res['concurrency']))} "
           f"--rounds {res['rounds']} --duration {res['duration']} --iters {res['iters']} --warmup {res['warmup']}", ""]
    for T, models in res["cells"].items():
        out += [f"### {T} thread{'s' if T != '1' else ''}", "",
                f"T = {T}. {header(res)}", "",
                "| model | C | convd-run p50 / p99 ms / req/s | convd daemon p50 / p99 ms / req/s | daemon compute p50 ms "
                "| onnxruntime p50 / p99 ms / req/s | DeepSparse p50 / p99 ms / req/s | daemon p50 / convd-run p50 "
                "| best anchor p50 / daemon p50 | daemon req/s / best anchor's | spread |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for n, cs in models.items():
            for c, e in cs.items():
                ip = e["inproc"] if c == "1" else None
                dm = e["daemon"]
                comp = med(dm, "compute_p50")
                bm = med(dm, "batch_mean")
                comp_txt = fmt(comp) + (f" (batch {bm:.1f})" if bm and bm > 1.05 else "")
                d50, dthr = med(dm, "p50"), med(dm, "thr")
                anchors_ = {k: (med(e[k], "p50"), med(e[k], "thr")) for k in ("ort", "deepsparse")}
                lat = {k: v[0] for k, v in anchors_.items() if v[0]}
                thr = {k: v[1] for k, v in anchors_.items() if v[1]}
                ratio_in = fmt(d50 / med(ip, "p50")) + "x" if ip and d50 and med(ip, "p50") else "—"
                if lat and d50:
                    k = min(lat, key=lat.get)
                    r_lat = f"{lat[k] / d50:.3g}x ({LABEL[k]})"
                else:
                    r_lat = "n/a"
                if thr and dthr:
                    k = max(thr, key=thr.get)
                    r_thr = f"{dthr / thr[k]:.3g}x ({LABEL[k]})"
                else:
                    r_thr = "n/a"
                p50s = [[r["p50"] for r in rs if "p50" in r] for rs in (ip, dm, e["ort"], e["deepsparse"]) if rs]
                spread = max(((max(v) - min(v)) / float(np.median(v)) for v in p50s if v), default=0)
                out.append(f"| {n} | {c} | {cell(ip)} | {cell(dm)} | {comp_txt} | {cell(e['ort'])} | "
                           f"{cell(e['deepsparse'])} | {ratio_in} | {r_lat} | {r_thr} | {spread:.0%} |")
        out.append("")
    errs = [f"{LABEL[e]} {n} T={T} C={c}: {msg}" for T, ms in res["cells"].items() for n, cs in ms.items()
            for c, es in cs.items() for e, rs in es.items() for msg in sorted(set(errors_of(rs)))]
    sched = "; ".join(f"{n}: " + ", ".join(f"T={T} {s.split('.')[-1]} ({m['ds_streams'][T]} streams)"
                                           for T, s in m["ds_scheduler"].items())
                      for n, m in res["models"].items() if m["ds_scheduler"])
    errs_rel = "; ".join(f"{n} convd {m['err']['inproc']:.1e}, DeepSparse {m['err']['deepsparse']:.1e}"
                         for n, m in res["models"].items() if "err" in m)
    out += [f"Cells: p50 / p99 in ms / throughput in requests per "
            f"second, batch 1; medians over {res['rounds']} rounds of each round's figure, the engine order rotating "
            f"per round. C = 1: convd-run {res['warmup']} warm-ups + {res['iters']} runs (its median, p99 and 1 / mean); "
            f"onnxruntime and DeepSparse the same number of timed run() calls; the daemon a {res['duration']} s "
            f"convbench burst after 1 s (C client, closed loop, a fresh `convd --threads T` at its other defaults "
            f"per burst; round trips with msgpack and the socket). C > 1: closed loops of C callers for "
            f"{res['duration']} s after 1 s (convbench; onnxruntime: C Python threads on one session, each run() "
            f"on its own thread plus the intra-op pool, the callers pinned to T CPUs; DeepSparse: C threads "
            f"on a multi_stream engine). convd-run is single-caller: — at C > 1. Daemon compute: its own compute_us "
            f"p50 (and mean batch when > 1), warm-up included. Ratios > 1 favour the convd daemon; the best anchor "
            f"is the faster of onnxruntime and DeepSparse in that cell. Spread: (max - min) / median of the round "
            f"p50s, the largest engine's.",
            "",
            f"DeepSparse schedulers of the C > 1 loops: {sched or 'n/a'}. Max rel. error vs onnxruntime on one "
            f"input (at T = {next(iter(res['cells']))}): {errs_rel or 'n/a'}."]
    for note in res.get("notes", []) + errs:
        out += ["", f"Note: {note}"]
    return "\n".join(out) + "\n"


def markdown_sweep(res):
    out = [f"    {command(res)} --models {','.join(res['cells'])} --rounds {res['rounds']} "
           f"--duration {res['duration']}", ""]
    summary_lines = []
    for n, cfgs in res["cells"].items():
        out += [f"### {n}, concurrency {res['concurrency'][0]}", "", header(res), "",
                "| daemon setting | req/s | p50 ms | p99 ms | compute p50 ms | mean batch | of the best |",
                "|---|---|---|---|---|---|---|"]
        thr = {k: med(v, "thr") for k, v in cfgs.items()}
        # The best of the defaults and workers x threads (extras are shown beside them).
        ok = {k: v for k, v in thr.items() if v and k not in res.get("sweep_extra", [])}
        best = max(ok, key=ok.get) if ok else None
        for k, rs in cfgs.items():
            label = k
            if k == "default" and any("workers" in r for r in rs):
                r0 = next(r for r in rs if "workers" in r)
                label = f"default (workers {r0['workers']}, threads {r0['threads']})"
            share = f"{thr[k] / ok[best]:.0%}" if best and thr[k] else "n/a"
            out.append(f"| {label}{' **best**' if k == best else ''} | {fmt(thr[k])} | {fmt(med(rs, 'p50'))} | "
                       f"{fmt(med(rs, 'p99'))} | {fmt(med(rs, 'compute_p50'))} | {fmt(med(rs, 'batch_mean'))} | {share} |")
        out.append("")
        if best:
            summary_lines.append(f"{n}: best `{best}` {ok[best]:.1f} req/s; the defaults reach "
                                 f"{thr['default'] / ok[best] if thr.get('default') else float('nan'):.2f}x of it")
        for k, rs in cfgs.items():
            for msg in sorted(set(errors_of(rs))):
                summary_lines.append(f"{n} {k}: {msg}")
    out += [f"convbench closed loop, concurrency {res['concurrency'][0]}, {res['duration']} s after 1 s, a fresh "
            f"daemon per burst; medians over {res['rounds']} rounds, the setting order rotating per round. "
            f"Best by throughput. " + "; ".join(summary_lines) + "."]
    return "\n".join(out) + "\n"


def markdown_idle(res):
    return "\n".join([
        header(res), "", f"    {command(res)} --models {res['model']} --idle-seconds {res['idle_seconds']}", "",
        "| model | daemon | OS threads | idle s | CPU s | % of one core |", "|---|---|---|---|---|---|",
        f"| {res['model']} | defaults (workers {res['workers']}, threads {res['threads']}, worker-spin-us "
        f"{res['spin_us']}) | {res['os_threads']} | {res['idle_s']:.1f} | {res['cpu_s']:.2f} | {res['cpu_pct']:.2f}% |",
        "", f"After one convbench burst ({res['burst_requests']} requests, concurrency {SWEEP_CONCURRENCY}, "
        f"{res['duration']} s) the daemon's utime + stime (/proc/PID/stat, in ticks of 1 / {os.sysconf('SC_CLK_TCK')} s) over the idle time, in % of one core."]) + "\n"


def markdown(res):
    return {"matrix": markdown_matrix, "sweep": markdown_sweep, "idle": markdown_idle}[res["mode"]](res)


def write_section(res, md):
    title = TITLES[res["mode"]]
    intro = {"matrix": "Latency and throughput of convd (in process and through the daemon), onnxruntime and "
                       "DeepSparse 1.8.0 at several thread counts and concurrencies, in one interleaved run "
                       "(bench/all-cores.py; method: bench/README.md and `bench/all-cores.py --help`).",
             "sweep": "The daemon's --workers x --threads at concurrency 16, in one interleaved run "
                      "(`bench/all-cores.py --sweep`).",
             "idle": "CPU use of an idle daemon at its defaults after a burst (`bench/all-cores.py --idle`)."}
    anchors.replace_section(ROOT / "docs" / "PERFORMANCE.md", title, f"{title}\n\n{intro[res['mode']]}\n\n{md}")
    log(f"wrote the '{title}' section of docs/PERFORMANCE.md")


# ---- main --------------------------------------------------------------------------

def int_list(text, cores):
    out = []
    for tok in text.split(","):
        v = cores if tok.strip() == "all" else int(tok)
        if v < 1:
            raise ValueError(f"{tok}: must be >= 1")
        if v not in out:
            out.append(v)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--deepsparse-worker" in argv:  # in DeepSparse's venv: anchors.py's worker and the loops above
        return anchors.deepsparse_worker(worker_commands())
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated: resnet50, resnet18, mobilenetv2, optionally -VARIANT (u90, b90, ...)")
    ap.add_argument("--threads", default="1,2,all", help="thread counts; all = the CPUs of the affinity mask")
    ap.add_argument("--concurrency", default="1,16", help="callers in flight")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=float, help="seconds of each closed loop / convbench burst (default 5)")
    ap.add_argument("--iters", type=int, help="timed runs of convd-run and the C = 1 loops (default 20)")
    ap.add_argument("--warmup", type=int, help="warm-up runs of those (default 2)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round, 1 s, 3 runs")
    ap.add_argument("--sweep", action="store_true", help="the daemon's --workers x --threads at concurrency 16")
    ap.add_argument("--sweep-extra", action="append", default=[], metavar="FLAGS",
                    help="with --sweep: one more setting, these daemon flags on the defaults (repeatable)")
    ap.add_argument("--idle", action="store_true", help="an idle daemon's CPU use")
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--isa", choices=sorted(anchors.CAPS), default="native")
    ap.add_argument("--json", metavar="FILE", help="the raw numbers")
    ap.add_argument("--from-json", metavar="FILE", help="no measurement: the tables of an earlier --json")
    ap.add_argument("--write", action="store_true", help="replace this mode's section of docs/PERFORMANCE.md")
    ap.add_argument("--cache", metavar="DIR", help="model files (default $CONVD_BENCH_CACHE or ~/.cache/convd/bench-models)")
    ap.add_argument("--deepsparse-python", metavar="PATH", help="default: the venv of bench/setup-deepsparse")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds for one convd-run, convbench or DeepSparse call")
    a = ap.parse_args(argv)
    if a.from_json:
        results = json.loads(pathlib.Path(a.from_json).read_text())
        return report(results if isinstance(results, list) else [results], a.write)
    quick = {"rounds": 1, "duration": 1.0, "iters": 3, "warmup": 1}
    full = {"rounds": 3, "duration": 5.0, "iters": 20, "warmup": 2}
    for k in quick:
        if getattr(a, k) is None:
            setattr(a, k, (quick if a.quick else full)[k])
    if a.rounds < 1 or a.iters < 1 or a.warmup < 0 or a.duration <= 0 or a.idle_seconds <= 0:
        ap.error("--rounds, --iters must be >= 1, --warmup >= 0, --duration and --idle-seconds > 0")
    cores = len(os.sched_getaffinity(0))
    try:
        threads_list = int_list(a.threads, cores)
        a.conc = int_list(a.concurrency, cores)
    except ValueError as e:
        ap.error(str(e))
    import benchmodels
    names = a.models.split(",")
    for n in names:
        base, _, variant = n.partition("-")
        if base not in benchmodels.MODELS or (variant and variant not in benchmodels.VARIANTS):
            ap.error(f"unknown model {n}: {', '.join(benchmodels.MODELS)}, optionally "
                     f"-{'/'.join(benchmodels.VARIANTS)}")
    results = []
    if a.sweep:
        results.append(run_sweep(a, names))
    if a.idle:
        results.append(run_idle(a, names))
        results[-1]["idle_seconds"] = a.idle_seconds
    if not (a.sweep or a.idle):
        results.append(run_matrix(a, names, threads_list))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results[0] if len(results) == 1 else results, indent=1))
    return report(results, a.write)


def report(results, write):
    """Prints each result's tables; with write, also into docs/PERFORMANCE.md."""
    for res in results:
        md = markdown(res)
        print(md)
        if write:
            write_section(res, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
