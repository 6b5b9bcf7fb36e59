"""The `plan` method and the CPU facts, against a real daemon.

plan: `convctl plan NAME` is the daemon's own plan of a loaded model, every
layer profiled in the daemon (measured ms > 0), with the kernels and layouts
`convctl plan FILE` finds for the same file; an unknown model and each bad
param get their exact error code; the profile runs off the event loop and
off the inference workers (an `infer` sent while a long plan profiles is
answered before the plan, sized from a measured inference); layers on a
reference kernel are marked !ref in both modes; the Python clients' plan().

CPU facts: `health`, `stats`, `plan`, `metrics` and `convd --version` report
the same CPU, ISAs and blocked layout; with ONEDNN_MAX_CPU_ISA=AVX2 in the
daemon's environment the layout is NCHW8C and oneDNN's ISA avx2.
"""
import asyncio
import json
import os
import re
import select
import subprocess
import time

import numpy as np
import pytest

import convd
import convd.aio
from tests.integration.daemon_wire import Wire
from tests.models import builders
from tests.support import paths
from tests.support.daemon import TestDaemon

MODEL = "r18"
MAX_BATCH = 4
CPU_KEYS = {"model", "kernels_isa", "kernels_capped", "dnnl_isa", "layout", "block"}


def write_model(models_dir):
    """A small ResNet-18: convs, pools, residual adds and a Gemm, ~1 ms a run."""
    m = builders.resnet18(np.random.default_rng(7), classes=10, size=48, width=0.5)
    path = models_dir / f"{MODEL}.onnx"
    builders.save(m, path)
    with open(str(path) + ".conf", "w") as f:
        f.write(f"max_batch = {MAX_BATCH}\n")
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    write_model(d)
    return d


@pytest.fixture(scope="module")
def d(models):
    with TestDaemon(models_dir=models) as daemon:
        yield daemon


def ctl(*args, socket=None, env=None, timeout=300):
    e = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    e.update(env or {})
    cmd = [paths.binary("convctl")] + (["--socket", socket] if socket else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def ctl_json(*args, **kw):
    r = ctl(*args, "--json", **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def x_input(batch):
    return {"input": np.random.default_rng(batch).standard_normal((batch, 3, 48, 48)).astype(np.float32)}


# ---- plan NAME: the daemon's plan, measured there --------------------------------

def test_plan_name_is_measured_in_the_daemon_and_matches_plan_file(d, models):
    mine = ctl_json("plan", MODEL, "--runs", "3", socket=d.socket)
    assert mine["source"] == "daemon" and mine["model"] == MODEL
    assert mine["path"] == f"{MODEL}.onnx" and mine["max_batch"] == MAX_BATCH
    assert mine["batch"] == 1 and mine["runs"] == 3
    layers = mine["layers"]
    with convd.Client(d.socket) as c:
        entry = [m for m in c.models() if m["name"] == MODEL][0]
    assert len(layers) == entry["layers"]
    assert [l["index"] for l in layers] == list(range(len(layers)))
    for l in layers:
        assert l["measured_ms"] is not None and l["measured_ms"] > 0, l
        assert l["kernel"] and l["layout"] in ("NCHW", "NCHW8C", "NCHW16C"), l
    assert mine["total"]["measured_ms"] > 0
    assert {l["op"].split("+")[0] for l in layers} >= {"Conv", "MaxPool", "Gemm"}

    # The same file planned in convctl's own process: the same layers on the
    # same kernels and layouts (the daemon runs what a load of the file gives).
    file_plan = ctl_json("plan", str(models / f"{MODEL}.onnx"), "--runs", "1")
    assert file_plan["source"] == "file"
    key = lambda p: [(l["name"], l["op"], l["kernel"], l["layout"], l["reference"])
                     for l in p["layers"]]
    assert key(mine) == key(file_plan)
    assert mine["device"] == file_plan["device"] == "cpu"
    assert mine["layout"] == file_plan["layout"] == mine["cpu"]["layout"]
    assert mine["cpu"] == file_plan["cpu"]
    # Both modes print the same fields per layer.
    assert [sorted(l) for l in mine["layers"]] == [sorted(l) for l in file_plan["layers"]]


def test_plan_name_human_table(d, models):
    r = ctl("plan", MODEL, "--runs", "2", "--all", socket=d.socket)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"plan {MODEL}: the daemon's model ({MODEL}.onnx), profiled in the daemon")
    with convd.Client(d.socket) as c:
        cpu = c.health()["cpu"]
    assert lines[1] == (f"device cpu, layout {cpu['layout']}; cpu {cpu['model']}: "
                        f"kernels {cpu['kernels_isa']}, dnnl {cpu['dnnl_isa']}")
    head = lines[3].split()
    assert head[:3] == ["#", "layer", "op"] and "kernel" in head and "layout" in head
    rows = [ln for ln in lines[4:] if re.match(r"\s*\d+\s", ln)]
    n = len(ctl_json("plan", MODEL, "--runs", "1", socket=d.socket)["layers"])
    assert len(rows) == n  # --all: every layer
    for row in rows:
        meas = row.split()[-3]  # ... pred ms, meas ms, MFLOP, skipped
        assert float(meas) > 0, row
    assert "!ref" not in r.stdout and "reference kernel" not in r.stdout
    offline = ctl("plan", str(models / f"{MODEL}.onnx"), "--runs", "1")
    assert offline.returncode == 0, offline.stderr
    assert "a file, planned in this process (offline)" in offline.stdout.splitlines()[0]


def test_convctl_plan_argument_file_or_name(d, tmp_path):
    """A path (existing, with a '/', or *.onnx) is planned offline; a bare
    name is asked of the daemon, even when no such model is loaded."""
    for arg in (str(tmp_path / "missing.onnx"), "missing.onnx", str(tmp_path / "missing")):
        r = ctl("plan", arg, socket=d.socket)
        assert r.returncode == 1 and r.stderr.startswith("convctl: E_IO:"), (arg, r.stderr)
    r = ctl("plan", "missing", socket=d.socket)
    assert r.returncode == 1 and r.stderr.startswith("convctl: E_NOT_FOUND:"), r.stderr


def test_plan_batch_and_runs_echoed(d):
    with convd.Client(d.socket, timeout=120) as c:
        r = c.plan(MODEL, batch=MAX_BATCH, runs=2)
    assert r["batch"] == MAX_BATCH and r["runs"] == 2 and r["max_batch"] == MAX_BATCH
    assert all(l["measured_ms"] > 0 for l in r["layers"])


def test_plan_unknown_model_is_e_not_found(d):
    with convd.Client(d.socket) as c:
        with pytest.raises(convd.ConvdError) as e:
            c.plan("no-such-model")
        assert e.value.code == "E_NOT_FOUND"
        assert c.health()["status"] == "ok"  # the connection is still usable
    r = ctl("plan", "no-such-model", socket=d.socket)
    assert r.returncode == 1
    assert r.stderr.startswith("convctl: E_NOT_FOUND:")


BAD_PARAMS = {
    "batch_zero": {"model": MODEL, "batch": 0},
    "batch_negative": {"model": MODEL, "batch": -1},
    "batch_over_max_batch": {"model": MODEL, "batch": MAX_BATCH + 1},
    "batch_not_int": {"model": MODEL, "batch": "2"},
    "batch_float": {"model": MODEL, "batch": 1.0},
    "runs_zero": {"model": MODEL, "runs": 0},
    "runs_over_limit": {"model": MODEL, "runs": 1001},
    "runs_not_int": {"model": MODEL, "runs": [3]},
    "model_missing": {"runs": 2},
    "model_not_str": {"model": 5},
}


@pytest.mark.parametrize("case", sorted(BAD_PARAMS))
def test_plan_bad_params_are_e_params(d, case):
    with Wire.connect(d) as w:
        w.send_request("plan", BAD_PARAMS[case], msgid=9)
        msg = w.recv()[0]
    assert msg[0] == 1 and msg[1] == 9 and msg[3] is None
    assert msg[2]["code"] == "E_PARAMS", msg


def test_plan_without_params_is_e_params(d):
    with Wire.connect(d) as w:
        w.send_request("plan", None, msgid=4)
        assert w.recv()[0][2]["code"] == "E_PARAMS"


def test_convctl_plan_bad_batch_is_e_params(d):
    r = ctl("plan", MODEL, "--batch", str(MAX_BATCH + 1), socket=d.socket)
    assert r.returncode == 1 and r.stderr.startswith("convctl: E_PARAMS:"), r.stderr
    # Offline-only options with a model name: a usage error, nothing sent.
    r = ctl("plan", MODEL, "--tune", socket=d.socket)
    assert r.returncode == 2 and "--tune is for a model file" in r.stderr


def test_infer_is_answered_while_a_plan_profiles(d):
    """The profile runs neither on the loop nor on an inference worker."""
    x = x_input(MAX_BATCH)
    with convd.Client(d.socket, timeout=120) as c:
        c.infer(MODEL, x)  # warm
        times = []
        for _ in range(5):
            t0 = time.monotonic()
            c.infer(MODEL, x)
            times.append(time.monotonic() - t0)
    one = sorted(times)[2]
    # A plan of `runs` runs takes about (runs + 1) x one run: aim at ~4 s
    # (within the 1..1000 runs the method accepts).
    runs = int(min(1000, max(20, 4.0 / one)))
    expected = (runs + 1) * one

    with Wire.connect(d, timeout=max(60.0, 20 * expected)) as w, \
            convd.Client(d.socket, timeout=60) as c:
        t0 = time.monotonic()
        w.send_request("plan", {"model": MODEL, "batch": MAX_BATCH, "runs": runs}, msgid=1)
        # Wait until the profile is running (taken by the profiler thread).
        while c.stats()["requests"]["running"] == 0:
            assert time.monotonic() - t0 < 60, "the plan never ran"  # hang guard
            time.sleep(0.005)  # polls the counter: the state waited for
        assert c.health()["status"] == "ok"
        t_infer = time.monotonic()
        out = c.infer(MODEL, x)
        infer_done = time.monotonic()
        assert [o.shape for o in out.values()] == [(MAX_BATCH, 10)]
        # The plan has not answered yet: nothing readable on its socket.
        readable, _, _ = select.select([w.sock], [], [], 0)
        assert not readable, (f"the plan ({runs} runs, ~{expected:.2f} s) finished before an infer "
                              f"sent {t_infer - t0:.3f} s after it was answered")
        msg = w.recv(timeout=max(60.0, 20 * expected))[0]
        plan_done = time.monotonic()
    assert msg[2] is None, msg
    assert msg[3]["runs"] == runs
    assert plan_done - t0 > infer_done - t0
    # The infer took about one inference, not the plan's time (a ratio of
    # times measured in this test, with a wide margin; the health call
    # before it only has to be answered).
    assert infer_done - t_infer < max(0.5 * (plan_done - t0), 10 * one + 0.5)


def test_plan_of_a_model_unloaded_meanwhile_still_answers(d, models):
    """The request holds its model: an unload while it profiles frees nothing under it."""
    with convd.Client(d.socket, timeout=120) as c:
        c.load("r18b", f"{MODEL}.onnx")
        with Wire.connect(d, timeout=120) as w:
            w.send_request("plan", {"model": "r18b", "runs": 200}, msgid=3)
            t0 = time.monotonic()
            while c.stats()["requests"]["running"] == 0:
                assert time.monotonic() - t0 < 60, "the plan never ran"  # hang guard
                time.sleep(0.005)  # polls the counter: the state waited for
            c.unload("r18b")
            msg = w.recv(timeout=120)[0]
        assert msg[2] is None, msg
        assert msg[3]["model"] == "r18b"
        assert all(l["measured_ms"] > 0 for l in msg[3]["layers"])
        assert "r18b" not in [m["name"] for m in c.models()]


def test_plan_counted_by_method(d):
    with convd.Client(d.socket) as c:
        before = c.stats()["requests"]["by_method"]["plan"]
        c.plan(MODEL, runs=1)
        assert c.stats()["requests"]["by_method"]["plan"] == before + 1


# ---- Python clients ------------------------------------------------------------

def test_python_clients_plan(d):
    with convd.Client(d.socket, timeout=120) as c:
        r = c.plan(MODEL, batch=2, runs=2)
        cpu = c.health()["cpu"]
    assert r["model"] == MODEL and r["batch"] == 2 and r["runs"] == 2
    assert r["device"] == "cpu" and r["layout"] == cpu["layout"] and r["cpu"] == cpu
    assert r["reference_layers"] == sum(l["reference"] for l in r["layers"]) == 0
    assert r["measured_ms"] > 0
    conv = [l for l in r["layers"] if l["weighted"]]
    assert conv and all({"sparse", "structure", "pred_ms", "flops_dense"} <= set(l) for l in conv)

    async def aio():
        async with convd.aio.AsyncClient(d.socket) as a:
            p = await a.plan(MODEL, runs=1)
            with pytest.raises(convd.ConvdError) as e:
                await a.plan(MODEL, batch=MAX_BATCH + 1)
            return p, e.value.code
    p, code = asyncio.run(aio())
    assert p["runs"] == 1 and len(p["layers"]) == len(r["layers"])
    assert code == "E_PARAMS"


# ---- reference kernels are marked -----------------------------------------------

def test_reference_layers_marked_in_both_modes(tmp_path, models):
    env = {"CONVD_CPU_KERNELS": "ref"}  # the offline convctl's; the daemon's is a flag
    with TestDaemon(tmp_path, models_dir=models, args=["--cpu-kernels", "ref"]) as dref:
        r = ctl("plan", MODEL, "--runs", "1", socket=dref.socket)
        j = ctl_json("plan", MODEL, "--runs", "1", socket=dref.socket)
    file_r = ctl("plan", str(models / f"{MODEL}.onnx"), "--runs", "1", env=env)
    file_j = ctl_json("plan", str(models / f"{MODEL}.onnx"), "--runs", "1", env=env)
    for out, plan in ((r, j), (file_r, file_j)):
        assert out.returncode == 0, out.stderr
        refs = [l for l in plan["layers"] if l["reference"]]
        assert refs and plan["total"]["reference_layers"] == len(refs)
        marked = [ln for ln in out.stdout.splitlines()
                  if re.match(r"\s*\d+\s", ln) and ln.split()[-7] == "!ref"]
        # Every reference layer is listed and marked (pools too, without --all).
        assert sorted(ln.split()[1] for ln in marked) == sorted(l["name"] for l in refs)
        assert f"{len(refs)} layers on a reference kernel (slow)" in out.stdout
    assert [l["name"] for l in j["layers"] if l["reference"]] == \
        [l["name"] for l in file_j["layers"] if l["reference"]]


# ---- CPU facts ------------------------------------------------------------------

def version_cpu(env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([paths.binary("convd"), "--version"], capture_output=True, text=True,
                       timeout=60, env=e)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("convd ") and len(lines) == 2, r.stdout
    m = re.fullmatch(r"cpu: (.+); kernels (\S+)( \(capped by --max-isa\))?; dnnl (\S+); layout (\S+)",
                     lines[1])
    assert m, lines[1]
    return {"model": m[1], "kernels_isa": m[2], "kernels_capped": bool(m[3]), "dnnl_isa": m[4],
            "layout": m[5]}


def metrics_cpu(text):
    lines = [ln for ln in text.splitlines() if ln.startswith("convd_cpu_info{")]
    assert len(lines) == 1, text[:500]
    assert lines[0].endswith("} 1")
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', lines[0]))
    assert "# TYPE convd_cpu_info gauge" in text
    return labels


def check_cpu_agrees(daemon, env=None):
    with convd.Client(daemon.socket, timeout=120) as c:
        health = c.health()["cpu"]
        stats = c.stats()["cpu"]
        metrics = metrics_cpu(c.call("metrics"))
        plan = c.plan(MODEL, runs=1)
    assert set(health) == CPU_KEYS
    assert health == stats == plan["cpu"]
    assert plan["layout"] == health["layout"]
    assert {"NCHW16C": 16, "NCHW8C": 8, "NCHW": 1}[health["layout"]] == health["block"]
    assert health["kernels_isa"] in ("avx512vnni", "avx512f", "avx2", "scalar")
    assert isinstance(health["kernels_capped"], bool)
    assert not health["dnnl_isa"].startswith("cpu_isa_")
    assert metrics == {"cpu_model": health["model"], "kernels_isa": health["kernels_isa"],
                       "kernels_capped": str(int(health["kernels_capped"])),
                       "dnnl_isa": health["dnnl_isa"], "layout": health["layout"],
                       "block": str(health["block"])}
    v = version_cpu(env)
    assert v == {k: health[k] for k in v}
    return health, plan


def test_cpu_facts_agree(d):
    health, _ = check_cpu_agrees(d)
    with open("/proc/cpuinfo") as f:
        names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    if names:
        assert health["model"] == names[0]
    r = ctl("health", socket=d.socket)
    assert r.returncode == 0, r.stderr
    rows = dict(ln.split(None, 1) for ln in r.stdout.splitlines())
    assert rows["cpu"] == health["model"]
    assert rows["kernels"].split()[0] == health["kernels_isa"]
    assert rows["dnnl"] == health["dnnl_isa"]
    assert rows["layout"] == f"{health['layout']} (block {health['block']})"
    assert ctl_json("health", socket=d.socket)["cpu"] == health
    r = ctl("stats", socket=d.socket)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("\ncpu:\n", 1)[1].split("\n\n", 1)[0]
    assert re.search(rf"^  dnnl_isa\s+{re.escape(health['dnnl_isa'])}$", section, re.M)
    assert re.search(rf"^  layout\s+{health['layout']}$", section, re.M)
    assert ctl_json("stats", socket=d.socket)["cpu"] == health


def cpu_has(flag):
    with open("/proc/cpuinfo") as f:
        for ln in f:
            if ln.startswith("flags"):
                return flag in ln.split()
    return False


@pytest.mark.skipif(not cpu_has("avx2"), reason="needs an AVX2 CPU")
def test_onednn_capped_to_avx2_gives_nchw8c(tmp_path, models):
    env = {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    with TestDaemon(tmp_path, models_dir=models, env=env) as dcap:
        health, plan = check_cpu_agrees(dcap, env)
    assert health["dnnl_isa"] == "avx2"
    assert health["layout"] == "NCHW8C" and health["block"] == 8
    assert plan["layout"] == "NCHW8C"
    convs = [l for l in plan["layers"] if l["op"].startswith("Conv")]
    assert convs and all(l["layout"] in ("NCHW8C", "NCHW") for l in convs)
    assert any(l["layout"] == "NCHW8C" for l in convs)
    assert not any(l["layout"] == "NCHW16C" for l in plan["layers"])
    assert all("avx512" not in l["kernel"] for l in plan["layers"])
    assert plan["reference_layers"] == 0


# ---- the bf16 switch ----------------------------------------------------------------

def test_daemon_bf16_on_plans_bf16_and_serves_near_float32(tmp_path, models):
    """--bf16 on reaches the daemon's backend: where oneDNN runs bf16 natively
    the plan's convs are bf16 and the answers stay within bf16's error of
    onnxruntime's float32 run; elsewhere the plan stays float32 (and exact)."""
    import onnxruntime as ort
    with TestDaemon(tmp_path, models_dir=models, args=["--bf16", "on"]) as db:
        plan = ctl_json("plan", MODEL, "--runs", "1", socket=db.socket)
        x = x_input(3)
        with convd.Client(db.socket, timeout=120) as c:
            got = c.infer(MODEL, x)
    convs = [l for l in plan["layers"] if l["op"].startswith("Conv")]
    native = "bf16" in plan["cpu"]["dnnl_isa"] or "amx" in plan["cpu"]["dnnl_isa"]
    assert convs and all(l["dtype"] == ("bf16" if native else "f32") for l in convs), \
        [(l["name"], l["dtype"], l["kernel"]) for l in convs]
    sess = ort.InferenceSession(str(models / f"{MODEL}.onnx"), providers=["CPUExecutionProvider"])
    want = sess.run(None, x)[0].astype(np.float64)
    y = np.asarray(next(iter(got.values())) if isinstance(got, dict) else got, dtype=np.float64)
    rel = np.linalg.norm(y - want) / np.linalg.norm(want)
    assert rel <= (2e-2 if native else 1e-5), rel
    if native:
        assert rel > 0  # it did run in bf16
