#!/usr/bin/env python3
"""convd against its two anchors, onnxruntime and DeepSparse 1.8.0, in one
run, on the same ONNX files, 1 thread, batch 1 (or --threads T, --batch B:
every engine the same), at a chosen ISA level.

    bench/setup-deepsparse                  # once: DeepSparse's own venv, outside the checkout
    bench/anchors.py [--isa native|avx2] [--models resnet50,resnet18,...] [--rounds 5]
                     [--threads 1] [--batch 1]
                     [--iters 20] [--warmup 2] [--json FILE] [--write] [--cache DIR]
                     [--deepsparse-python PATH] [--timeout S] [--from-json FILE]

Models (--models; default all): the dense resnet50, resnet18 and mobilenetv2
of tests/models/builders.py (224x224, 1000 classes, random weights) and
ResNet-50 pruned by `convctl prune` exactly as bench/sparse-models.py prunes
it: resnet50-u90, resnet50-u95 (unstructured), resnet50-b90 (4x1 blocks),
resnet50-f50 (50% of the filters). The files come from bench/benchmodels.py
(shared with sparse-models.py), in $CONVD_BENCH_CACHE or
~/.cache/convd/bench-models.

Engines, 1 thread, batch 1, every one fed the same input (x.npy, uniform in
[-1, 1], seed 1):
  convd       build/bin/convd-run FILE --bench N --warmup W --threads 1 --json
              (its own median of N runs), OMP_WAIT_POLICY=passive at 1 thread
              (at more, convd-run's own GOMP_SPINCOUNT, runtime/omp-env.c); the binary
              is copied first, so a rebuild of the tree cannot swap it
  ort         onnxruntime CPU EP, intra_op_num_threads=1, inter_op 1,
              ORT_ENABLE_ALL, ORT_SEQUENTIAL; median of N timed run() calls
  deepsparse  deepsparse.compile_model(FILE, batch_size=1, num_cores=1) in the
              venv of bench/setup-deepsparse (numpy < 2 and onnx < 1.17 do not
              fit this project's environment), one worker process for the run
              that keeps its engines; median of N timed run() calls

Method: R rounds; in each, every model runs W warm-ups + N timed runs of each
engine, the engine order rotating every round. The table shows the median of
the round medians, the ratios ort/convd and deepsparse/convd (> 1: convd is
faster) and the spread of the round medians (max - min over median; the
largest of the three engines) next to the ratios of each engine's fastest
round median (a check on a noisy run). Correctness, same run: each engine's output on
x.npy against ORT's, max |y - ort| / max(1, |ort|) over the elements.

--isa avx2 caps what can be capped:
  convd       ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN), CONVD_MAX_ISA=avx2 (its own kernels);
              convd logs that CONVD_MAX_ISA capped it
  deepsparse  NM_ARCH=avx2: deepsparse.cpu.cpu_architecture() takes the ISA
              from NM_ARCH instead of its CPU probe, and deepsparse.lib then
              loads deepsparse/avx2/deepsparse_engine.so instead of avx512/
  ort         no cap: MLAS picks its kernels from CPUID, with no switch; it
              keeps AVX-512, so the ort/convd ratio is then conservative
The table header names what each engine reported at run time (convd: oneDNN's
ISA line and the ISAs in its planned kernels; DeepSparse: the ISA of
cpu_architecture() and the binary it loaded).

--write replaces the section "## Anchors: <isa>" of docs/PERFORMANCE.md
(re-read just before writing), or appends it.
"""
import argparse
import json
import os
import pathlib
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
DENSE = ("resnet50", "resnet18", "mobilenetv2")
PRUNED = ("u90", "u95", "b90", "f50")
ALL_MODELS = DENSE + tuple(f"resnet50-{v}" for v in PRUNED)
ENGINES = ("convd", "ort", "deepsparse")
CAPS = {
    "native": {"convd": {}, "deepsparse": {}},
    "avx2": {"convd": {"ONEDNN_MAX_CPU_ISA": "AVX2", "CONVD_MAX_ISA": "avx2"},
             "deepsparse": {"NM_ARCH": "avx2"}},
}


def log(msg):
    print(f"[anchors] {msg}", file=sys.stderr, flush=True)


# ---- DeepSparse: a worker in its own venv -----------------------------------------

def deepsparse_worker(commands=None):
    """Runs in DeepSparse's venv (`python anchors.py --deepsparse-worker`): one
    JSON request per line on stdin, one JSON reply per line on the original
    stdout. Everything else that prints (DeepSparse's NM_ARCH notice goes to
    stdout) goes to stderr. An engine is kept under req["key"] (default: its
    path); `load` takes num_cores (default 1) and scheduler (default None:
    DeepSparse's own). `commands` maps further command names to
    fn(req, engines) -> reply dict (bench/all-cores.py's closed loops)."""
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import deepsparse
    from deepsparse import compile_model
    from deepsparse import lib as dslib
    from deepsparse.cpu import cpu_architecture
    engines = {}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            cmd = req["cmd"]
            if cmd == "info":
                arch = cpu_architecture()
                loaded = sorted(m for m in sys.modules if m.endswith("deepsparse_engine"))
                out = {"version": deepsparse.__version__, "isa": arch.isa, "vnni": bool(arch.vnni),
                       "binaries": os.path.basename(dslib.get_neuralmagic_binaries_dir()), "loaded": loaded,
                       "NM_ARCH": os.environ.get("NM_ARCH")}
            elif cmd == "load":
                t0 = time.perf_counter()
                eng, text = with_stderr(lambda: compile_model(req["path"], batch_size=req.get("batch", 1),
                                                              num_cores=req.get("num_cores", 1),
                                                              scheduler=req.get("scheduler")))
                engines[req.get("key", req["path"])] = eng
                out = {"compile_s": time.perf_counter() - t0, "num_streams": eng.num_streams,
                       "scheduler": str(eng.scheduler),
                       "fraction_of_supported_ops": float(eng.fraction_of_supported_ops),
                       "banner": next((line for line in text.splitlines() if "binary=" in line), None)}
            elif cmd == "run":
                x = np.load(req["input"])
                np.save(req["output"], engines[req.get("key", req["path"])].run([x])[0])
                out = {}
            elif cmd == "bench":
                eng, x = engines[req.get("key", req["path"])], np.load(req["input"])
                for _ in range(req["warmup"]):
                    eng.run([x])
                ts = []
                for _ in range(req["iters"]):
                    t0 = time.perf_counter()
                    eng.run([x])
                    ts.append((time.perf_counter() - t0) * 1e3)
                out = {"median_ms": float(np.median(ts))}
            elif commands and cmd in commands:
                out = commands[cmd](req, engines)
            else:
                raise ValueError(f"unknown command {cmd}")
        except Exception as e:  # the parent reports it and stops
            out = {"error": f"{type(e).__name__}: {e}"}
        reply.write(json.dumps(out) + "\n")
    return 0


def with_stderr(fn):
    """fn() and what it wrote to fd 2 (passed on to stderr as well)."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            r = fn()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    sys.stderr.write(text)
    return r, text


class DeepSparse:
    """The parent's end of the worker."""

    def __init__(self, python, env, timeout, script=__file__):
        """script: the file the venv's python runs with --deepsparse-worker
        (a script that imports this one may add commands to the worker)."""
        e = dict(os.environ, NM_DISABLE_ANALYTICS="1", **env)
        self.timeout = timeout
        self.proc = subprocess.Popen([python, str(pathlib.Path(script).resolve()), "--deepsparse-worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=e, text=True, bufsize=1)

    def call(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.close()
            raise RuntimeError(f"deepsparse worker: no answer to {req['cmd']} in {self.timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"deepsparse worker died (exit {self.proc.wait()}); its stderr is above")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"deepsparse {req['cmd']} {req.get('path', '')}: {out['error']}")
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- convd and onnxruntime ---------------------------------------------------------

def convd_cmd(binary, path, *args, env, timeout, threads=1, passive=True, batch=1):
    """passive: run with OMP_WAIT_POLICY=passive (no effect at 1 thread);
    False: convd-run's own wait policy, as a user gets it (runtime/omp-env.c)."""
    e = dict(os.environ, **env)
    if passive:
        e["OMP_WAIT_POLICY"] = "passive"
    cmd = [str(binary), str(path), "--threads", str(threads), "--batch", str(batch), "--max-batch", str(batch),
           *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=e, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r


def convd_isa(bindir, path, x, y, env, timeout, threads=1, batch=1):
    """Runs convd once on x (output to y) and says which ISA it used: oneDNN's
    own line (ONEDNN_VERBOSE) and the ISA part of the names of the kernels that
    `convctl plan` chooses (dnnl:jit:avx512_core -> avx512_core, dnnl:ref:any -> ref:any)."""
    r = convd_cmd(bindir / "convd-run", path, "--input", x, "--output", y, env=dict(env, ONEDNN_VERBOSE="1"),
                  timeout=timeout, threads=threads, batch=batch)
    dnnl = next((line.split("isa:", 1)[1].strip() for line in r.stdout.splitlines()
                 if "verbose,info,cpu,isa:" in line), "?")
    e = dict(os.environ, OMP_WAIT_POLICY="passive", **env)
    cmd = [str(bindir / "convctl"), "plan", str(path), "--json", "--threads", str(threads), "--runs", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=e, timeout=timeout)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    kernels = {}
    for layer in json.loads(p.stdout)["layers"]:
        parts = layer["kernel"].split(":")
        # avx512_core, avx512f, avx2, ...; else the name without its library (ref:any, jit:uni).
        isa = next((q for q in parts if re.match(r"(avx|sse|amx)", q)), ":".join(parts[1:]) or layer["kernel"])
        kernels[isa] = kernels.get(isa, 0) + 1
    sparse = next((line.strip() for line in r.stderr.splitlines() if "sparse kernels use" in line), "")
    return {"onednn_isa": dnnl, "kernel_isas": kernels, "sparse_line": sparse}


class Ort:
    def __init__(self, path, threads=1, optimize=True):
        """optimize=False: no graph rewrites, so a QDQ file runs as the ONNX
        spec defines it (DequantizeLinear, the f32 op, QuantizeLinear), not
        on onnxruntime's fused int8 kernels."""
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else
                                       ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.name = self.sess.get_inputs()[0].name

    def run(self, x):
        return self.sess.run(None, {self.name: x})[0]

    def bench(self, x, iters, warmup):
        for _ in range(warmup):
            self.run(x)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            self.run(x)
            ts.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(ts))


def fma_peak(bindir):
    """The core's FMA peak in GFLOP/s per ISA from build/bin/fma-peak ({} when
    it is not built: `make bench`)."""
    exe = bindir / "fma-peak"
    if not exe.exists():
        return {}
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120).stdout
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\w+) fma peak, 1 core: ([\d.]+)", out, re.M)}


def model_flops(binary, path, env, timeout):
    """FLOPs of one inference of the file as loaded (2 x multiply-adds of its dense layers)."""
    r = convd_cmd(binary, path, "--info", "--json", env=env, timeout=timeout)
    return int(json.loads(r.stdout)["summary"]["flops"])


def rel_err(got, want):
    """max |got - want| / max(1, |want|) (inf when the shapes differ)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float((np.abs(got - want) / np.maximum(1.0, np.abs(want))).max())


# ---- the machine ------------------------------------------------------------------

def cpu_info():
    model, flags = "?", set()
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        k, _, v = line.partition(":")
        if k.strip() == "model name" and model == "?":
            model = v.strip()
        elif k.strip() == "flags" and not flags:
            flags = set(v.split())
    return {"model": model, "avx512f": "avx512f" in flags, "avx2": "avx2" in flags, "cores": os.cpu_count()}


def git_rev():
    r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


# ---- the run ----------------------------------------------------------------------

def model_files(names, cache):
    sys.path.insert(0, str(ROOT / "bench"))
    import benchmodels
    files = {}
    for name in names:
        base, _, variant = name.partition("-")
        f = benchmodels.model_file(cache, base, 224, 0, log=log)
        files[name] = benchmodels.pruned_file(f, variant, log=log) if variant else f
    return files


def deepsparse_python(arg):
    if arg:
        return arg
    venv = pathlib.Path(os.environ.get("CONVD_BENCH_CACHE") or pathlib.Path.home() / ".cache" / "convd")
    py = venv / "deepsparse-venv" / "bin" / "python"
    if not py.exists():
        raise SystemExit(f"{py} is missing: run bench/setup-deepsparse first (or pass --deepsparse-python)")
    return str(py)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isa", choices=sorted(CAPS), default="native")
    ap.add_argument("--models", default=",".join(ALL_MODELS), help=f"comma-separated, of {', '.join(ALL_MODELS)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads of every engine (0: all CPUs of this process)")
    ap.add_argument("--batch", type=int, default=1, help="images per run, every engine")
    ap.add_argument("--json", metavar="FILE", help="the raw numbers")
    ap.add_argument("--write", action="store_true", help="write the section '## Anchors: ISA' of docs/PERFORMANCE.md")
    ap.add_argument("--cache", metavar="DIR", help="model files (default $CONVD_BENCH_CACHE or ~/.cache/convd/bench-models)")
    ap.add_argument("--deepsparse-python", metavar="PATH", help="default: the venv of bench/setup-deepsparse")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds for one convd-run or DeepSparse call")
    ap.add_argument("--from-json", metavar="FILE", help="no measurement: the table of an earlier --json")
    ap.add_argument("--baseline", metavar="VAR=VALUE[,...]",
                    help="also time convd with these environment settings, as engine convd-base: a before/after "
                    "in the same run (e.g. CONVD_WINOGRAD=off)")
    ap.add_argument("--deepsparse-worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.deepsparse_worker:
        return deepsparse_worker()
    if a.from_json:
        res = json.loads(pathlib.Path(a.from_json).read_text())
        summarize(res)
        md = markdown(res)
        print(md)
        if a.write:
            write_section(section_title(res), md)
        return 0
    names = a.models.split(",")
    for n in names:
        if n not in ALL_MODELS:
            ap.error(f"unknown model {n} (known: {', '.join(ALL_MODELS)})")
    if a.rounds < 1 or a.iters < 1 or a.warmup < 0 or a.threads < 0 or a.batch < 1:
        ap.error("--rounds, --iters and --batch must be >= 1, --warmup and --threads >= 0")
    threads = a.threads or len(os.sched_getaffinity(0))
    sys.path.insert(0, str(ROOT))
    from tests.support import paths
    caps = CAPS[a.isa]
    baseline = dict(kv.split("=", 1) for kv in a.baseline.split(",")) if a.baseline else None
    engines = ENGINES + (("convd-base",) if baseline else ())
    ds_python = deepsparse_python(a.deepsparse_python)
    sys.path.insert(0, str(ROOT / "bench"))
    import benchmodels
    files = model_files(names, benchmodels.cache_dir(a.cache))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="convd-anchors-"))
    ds = None
    try:
        for b in ("convd-run", "convctl"):  # copies: a rebuild of the tree during the run cannot swap them
            shutil.copy2(paths.binary(b), tmp / b)
        bindir = pathlib.Path(paths.binary("convd-run")).parent
        binary = tmp / "convd-run"
        x = tmp / "x.npy"
        np.save(x, np.random.default_rng(1).uniform(-1, 1, (a.batch, 3, 224, 224)).astype(np.float32))
        xa = np.load(x)
        res = {"isa": a.isa, "caps": caps, "cpu": cpu_info(), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
               "threads": threads, "batch": a.batch, "rounds": a.rounds, "iters": a.iters, "warmup": a.warmup,
               "convd_rev": git_rev(), "load_start": os.getloadavg(), "models": {}, "baseline": baseline,
               "fma_peak": [fma_peak(bindir)]}
        import onnxruntime
        res["ort_version"] = onnxruntime.__version__
        log(f"load average {res['load_start'][0]:.2f}; DeepSparse worker {ds_python}"
            + (f" with {caps['deepsparse']}" if caps["deepsparse"] else ""))
        ds = DeepSparse(ds_python, caps["deepsparse"], a.timeout)
        res["deepsparse"] = ds.call(cmd="info")
        log(f"deepsparse {res['deepsparse']}")
        sess = {}
        for n in names:
            t0 = time.perf_counter()
            sess[n] = Ort(files[n], threads)
            loaded = ds.call(cmd="load", path=str(files[n]), num_cores=threads, batch=a.batch)
            comp = loaded["compile_s"]
            if loaded["banner"]:
                res["deepsparse"]["banner"] = loaded["banner"].strip()
            # Correctness on the same input, and which ISA convd says it used.
            ref = sess[n].run(xa)
            info = convd_isa(tmp, files[n], x, tmp / "convd.npy", caps["convd"], a.timeout, threads, a.batch)
            ds.call(cmd="run", path=str(files[n]), input=str(x), output=str(tmp / "ds.npy"))
            err = {"convd": rel_err(np.load(tmp / "convd.npy"), ref), "deepsparse": rel_err(np.load(tmp / "ds.npy"), ref)}
            res["models"][n] = {"file": files[n].name, "convd_isa": info, "deepsparse_compile_s": comp,
                                "flops": model_flops(binary, files[n], caps["convd"], a.timeout) * a.batch,
                                "deepsparse_supported_ops": loaded["fraction_of_supported_ops"], "err": err,
                                "times": {e: [] for e in engines}}
            log(f"{n}: max rel. error vs ORT: convd {err['convd']:.2e}, deepsparse {err['deepsparse']:.2e}; "
                f"convd oneDNN isa {info['onednn_isa']!r}, kernels {info['kernel_isas']}"
                f"{'; ' + info['sparse_line'] if info['sparse_line'] else ''} "
                f"(DeepSparse compiled in {comp:.1f} s; set-up {time.perf_counter() - t0:.1f} s)")
        order = list(engines)
        t_start = time.monotonic()
        for r in range(a.rounds):
            for n in names:
                for e in order:
                    if e in ("convd", "convd-base"):
                        env = caps["convd"] if e == "convd" else {**caps["convd"], **baseline}
                        out = convd_cmd(binary, files[n], "--input", x, "--bench", a.iters, "--warmup", a.warmup,
                                        "--json", env=env, timeout=a.timeout, threads=threads, batch=a.batch,
                                        passive=threads == 1)  # more threads: convd's own wait policy, as users get it
                        t = json.loads(out.stdout)["bench"]["median_ms"]
                    elif e == "ort":
                        t = sess[n].bench(xa, a.iters, a.warmup)
                    else:
                        t = ds.call(cmd="bench", path=str(files[n]), input=str(x), iters=a.iters,
                                    warmup=a.warmup)["median_ms"]
                    res["models"][n]["times"][e].append(t)
            log(f"round {r + 1}/{a.rounds} done ({time.monotonic() - t_start:.0f} s, "
                f"load {os.getloadavg()[0]:.2f})")
            order = order[1:] + order[:1]
        res["load_end"] = os.getloadavg()
        res["fma_peak"].append(fma_peak(bindir))
    finally:
        if ds:
            ds.close()
        shutil.rmtree(tmp, ignore_errors=True)
    summarize(res)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1))
    md = markdown(res)
    print(md)
    if a.write:
        write_section(section_title(res), md)
    return 0


def section_title(res):
    """"## Anchors: avx2", and the threads and batch when not 1."""
    t, b = res.get("threads", 1), res.get("batch", 1)
    return f"## Anchors: {res['isa']}" + (f", {t} threads" if t != 1 else "") + (f", batch {b}" if b != 1 else "")


def summarize(res):
    """Medians of the round medians, ratios, best-round ratios and spreads, into res."""
    for m in res["models"].values():
        med = {e: float(np.median(ts)) for e, ts in m["times"].items()}
        m["median_ms"] = med
        m["ratio"] = {"ort": med["ort"] / med["convd"], "deepsparse": med["deepsparse"] / med["convd"]}
        best = {e: min(ts) for e, ts in m["times"].items()}
        m["best_ratio"] = {"ort": best["ort"] / best["convd"], "deepsparse": best["deepsparse"] / best["convd"]}
        if "convd-base" in med:
            m["ratio"]["convd-base"] = med["convd-base"] / med["convd"]
        m["spread"] = max((max(ts) - min(ts)) / float(np.median(ts)) for ts in m["times"].values())


def markdown(res):
    cpu, caps, ds = res["cpu"], res["caps"], res["deepsparse"]
    cap_txt = ("none (each engine at its best ISA)" if res["isa"] == "native" else
               "convd " + " ".join(f"{k}={v}" for k, v in caps["convd"].items()) +
               "; DeepSparse " + " ".join(f"{k}={v}" for k, v in caps["deepsparse"].items()) +
               "; onnxruntime none (no switch: MLAS keeps its AVX-512 kernels)")
    count = {}
    for m in res["models"].values():
        for k, c in m["convd_isa"]["kernel_isas"].items():
            count[k] = count.get(k, 0) + c
    isas = [f"{k} {c}" for k, c in sorted(count.items(), key=lambda kc: -kc[1])]
    banner = (re.search(r"\(system=[^)]*\)", ds.get("banner") or "") or ["?"])[0]
    fracs = [m["deepsparse_supported_ops"] for m in res["models"].values()]
    # convd's own kernels log their ISA and whether CONVD_MAX_ISA capped it.
    sparse = sorted({m["convd_isa"]["sparse_line"] for m in res["models"].values() if m["convd_isa"]["sparse_line"]})
    dnnl = sorted({m["convd_isa"]["onednn_isa"] for m in res["models"].values()})
    la, lb = res["load_start"], res["load_end"]
    spreads = [m["spread"] for m in res["models"].values()]
    cmd = "bench/anchors.py" + (f" --isa {res['isa']}" if res["isa"] != "native" else "")
    if ",".join(res["models"]) != ",".join(ALL_MODELS):
        cmd += f" --models {','.join(res['models'])}"
    if (res["rounds"], res["iters"], res["warmup"]) != (5, 20, 2):
        cmd += f" --rounds {res['rounds']} --iters {res['iters']} --warmup {res['warmup']}"
    tb = (res.get("threads", 1), res.get("batch", 1))
    cmd += (f" --threads {tb[0]}" if tb[0] != 1 else "") + (f" --batch {tb[1]}" if tb[1] != 1 else "")
    out = [f"CPU: {cpu['model']}, {cpu['cores']} cores; avx512f: {'yes' if cpu['avx512f'] else 'no'}. "
           f"ISA caps: {cap_txt}. Threads {tb[0]}, batch {tb[1]}. Measured {res['date']}, convd {res['convd_rev']}, "
           f"onnxruntime {res['ort_version']}, DeepSparse {ds['version']}.",
           "",
           f"At run time: convd's oneDNN reported `{'; '.join(dnnl)}`; the ISA part of convd's planned kernels' "
           f"names (layers, all models): {', '.join(isas)}"
           f"{''.join(f'; it logged `{l}`' for l in sparse)}. DeepSparse's cpu_architecture() said `{ds['isa']}`, "
           f"it loaded `{ds['binaries']}/deepsparse_engine.so`, its banner: `{banner}`; share of the ops it ran "
           f"itself (fraction_of_supported_ops; the rest would run in its bundled onnxruntime): "
           f"{min(fracs):.2f} to {max(fracs):.2f}.",
           "",
           "    bench/setup-deepsparse",
           f"    {cmd} --write",
           "",
           "| model | convd ms | onnxruntime ms | DeepSparse ms | ort / convd | deepsparse / convd | "
           "best rounds: ort, deepsparse / convd | max rel. err. convd vs ORT | DeepSparse vs ORT | spread of rounds |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for n, m in res["models"].items():
        t, r, e, b = m["median_ms"], m["ratio"], m["err"], m["best_ratio"]
        out.append(f"| {n} | {t['convd']:.2f} | {t['ort']:.2f} | {t['deepsparse']:.2f} | {r['ort']:.3g}x | "
                   f"{r['deepsparse']:.3g}x | {b['ort']:.3g}x, {b['deepsparse']:.3g}x | {e['convd']:.1e} | {e['deepsparse']:.1e} | {m['spread']:.0%} |")
    if res.get("baseline"):
        base = " ".join(f"{k}={v}" for k, v in res["baseline"].items())
        out += ["", f"Before/after in the same run: convd with {base} (before) against convd as built (after).",
                "", f"| model | convd {base} ms | convd ms | before / after |", "|---|---|---|---|"]
        out += [f"| {n} | {m['median_ms']['convd-base']:.2f} | {m['median_ms']['convd']:.2f} | "
                f"{m['ratio']['convd-base']:.3g}x |" for n, m in res["models"].items()]
    peaks = [p for p in res.get("fma_peak", []) if p]
    dense = [(n, m) for n, m in res["models"].items() if "-" not in n and m.get("flops")]
    if peaks and dense:
        isa = "avx2" if res["isa"] == "avx2" else max(peaks[0], key=lambda k: peaks[0][k])
        pk = [p.get(isa, 0) for p in peaks]
        rates = "; ".join(f"{n} convd {m['flops'] / m['median_ms']['convd'] / 1e6:.0f}, onnxruntime "
                          f"{m['flops'] / m['median_ms']['ort'] / 1e6:.0f}, DeepSparse "
                          f"{m['flops'] / m['median_ms']['deepsparse'] / 1e6:.0f}" for n, m in dense)
        out += ["", f"The physical cap, measured in the same run (build/bin/fma-peak, one core, {isa} FMA): "
                f"{' and '.join(f'{v:.0f}' for v in pk)} GFLOP/s at the start and the end"
                f"{f' (per core: {tb[0]} threads have {tb[0]}x that)' if tb[0] > 1 else ''}. The dense models' FLOPs "
                f"(2 x multiply-adds of a direct convolution) per second of each engine, in GFLOP/s: {rates}. "
                "An engine above the peak does fewer multiply-adds than the direct convolution "
                "(Winograd or similar); a direct-convolution engine cannot pass it."]
    out += ["",
            f"{res['rounds']} rounds x ({res['warmup']} warm-ups + {res['iters']} timed runs) of every engine, the "
            "engine order rotating per round; times are medians of the round medians; ratios > 1 mean convd is "
            "faster; best rounds: the ratios of each engine's fastest round median. Errors: max |y - ort| / max(1, |ort|) on the same input. Spread: (max - min) / median of the "
            f"round medians, the largest engine's; over all models {min(spreads):.0%} to {max(spreads):.0%}. "
            f"Load average {la[0]:.2f} at the start, {lb[0]:.2f} at the end (2 cores, shared)."]
    if res["isa"] != "native":
        out += ["", "onnxruntime cannot be capped: it ran with AVX-512, so the ort / convd ratio is conservative "
                "(in convd's disfavour)."]
    return "\n".join(out) + "\n"


def write_section(title, md):
    doc = ROOT / "docs" / "PERFORMANCE.md"
    body = (f"{title}\n\nconvd against onnxruntime (CPU EP) and DeepSparse 1.8.0 on the same ONNX files "
            "in one interleaved run (threads and batch in the table's header): the dense ResNet-50, ResNet-18 and MobileNetV2 of "
            "tests/models/builders.py (224x224, random weights) and ResNet-50 pruned as in \"Pruned models\" "
            "(u90/u95 unstructured, b90 4x1 blocks, f50 half the filters). Method, engines and the ISA caps: "
            "bench/README.md and `bench/anchors.py --help`. None of the three engines uses OpenBLAS (convd's "
            "dense path is oneDNN, onnxruntime's is MLAS, DeepSparse has its own kernels), so "
            "OPENBLAS_CORETYPE plays no part.\n\n" + md)
    replace_section(doc, title, body)
    log(f"wrote the '{title}' section of {doc}")


def replace_section(doc, title, body):
    """Replaces the section `title` (a "## " line) of the file doc with body,
    which starts with that line, or appends body when the section is missing."""
    text = doc.read_text()  # re-read right before writing: others edit other sections
    m = re.search(rf"^{re.escape(title)}\n.*?(?=^## |\Z)", text, flags=re.S | re.M)
    if m:
        text = text[:m.start()] + body + ("\n" if m.end() < len(text) else "") + text[m.end():]
    else:
        text = text.rstrip() + "\n\n" + body
    doc.write_text(text)

if __name__ == "__main__":
    sys.exit(main())
