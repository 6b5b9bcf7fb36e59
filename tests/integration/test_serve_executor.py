"""The daemon's one compute executor (docs/OPERATIONS.md, "Compute threads"):
its size follows --threads and, by default, the affinity mask (taskset);
runs of several workers that wait together run side by side in lanes, and
every answer equals onnxruntime's and the daemon's own answer to the same
request alone; with --lanes off every run is wide; workers never add
compute threads (the daemon's thread count does not grow with them)."""
import os
import shutil

import numpy as np
import onnxruntime as ort
import pytest

from tests.integration.daemon_wire import Wire, request
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon

RNG = np.random.default_rng()
C = int(RNG.integers(2, 6))
HW = int(RNG.integers(12, 33))
WAVE = 8  # requests pipelined at once
MAX_WAVES = 50  # hang guard of the lanes test (a wave almost always suffices)


def cnn(path):
    """Enough work per request that requests queue behind each other."""
    g = Graph(np.random.default_rng(5))
    x = g.input("x", [C, HW, HW])
    y = g.conv_bn_relu(x, C, 32, 3)
    for _ in range(6):
        y = g.conv_bn_relu(y, 32, 32, 3)
    y = g.conv(y, 32, 4, 1)
    return save(g.build([y], "cnn"), path)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


def from_wire(t):
    return np.frombuffer(t["data"], np.float32).reshape(t["shape"])


def rel_err(got, ref):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    return float((np.abs(got - ref) / np.maximum(1.0, np.abs(ref))).max())


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    cnn(d / "cnn.onnx")
    return d


@pytest.fixture(scope="module")
def ort_session(models):
    return ort.InferenceSession(str(models / "cnn.onnx"), providers=["CPUExecutionProvider"])


def compute(w):
    return w.result("stats")["compute"]


def thread_count(d):
    return len(os.listdir(f"/proc/{d.proc.pid}/task"))


def infer_wave(w, xs, first_id):
    w.send(b"".join(request(first_id + i, "infer", {"model": "cnn", "inputs": {"x": tensor(x)}})
                    for i, x in enumerate(xs)))
    got = {m[1]: m for m in w.recv(len(xs), timeout=120)}
    out = []
    for i in range(len(xs)):
        m = got[first_id + i]
        assert m[2] is None, m[2]
        (y,) = m[3]["outputs"].values()  # the one output, whatever its generated name
        out.append(from_wire(y))
    return out


def default_threads(c, cpus):
    """The daemon's default: the CPUs of its mask, at most its cgroup's CPU
    quota rounded down (at least 1)."""
    q = c["quota_millicpus"]
    return cpus if q == 0 else max(1, min(cpus, q // 1000))


def test_default_threads_are_the_affinity_mask(models):
    with TestDaemon(models_dir=models) as d, Wire.connect(d) as w:
        c = compute(w)
        assert c["threads"] == default_threads(c, len(os.sched_getaffinity(0)))
        assert c["affinity_cpus"] == len(os.sched_getaffinity(0))
        assert c["lanes"] == 1
        assert "compute: %d threads" % c["threads"] in d.stderr_text()


def test_threads_setting_sizes_the_executor(models):
    with TestDaemon(models_dir=models, args=["--threads", "1", "--lanes", "off"]) as d, Wire.connect(d) as w:
        c = compute(w)
        assert c["threads"] == 1
        assert c["lanes"] == 0


class TasksetDaemon(TestDaemon):
    def __init__(self, cpu, **kw):
        super().__init__(**kw)
        self.cpu = cpu

    def command(self):
        return ["taskset", "-c", str(self.cpu)] + super().command()


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_taskset_one_cpu_gives_one_thread(models):
    cpu = min(os.sched_getaffinity(0))
    with TasksetDaemon(cpu, models_dir=models) as d, Wire.connect(d) as w:
        assert compute(w)["threads"] == 1
        x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
        (y,) = infer_wave(w, [x], 1)
        assert y.shape[0] == 1


def task_masks(d):
    """Each of the daemon's threads' CPUs."""
    return {t: os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{d.proc.pid}/task")}


@pytest.mark.parametrize("binding", [{"OMP_PROC_BIND": "true"}, {"OMP_PLACES": "cores"},
                                     {"OMP_PROC_BIND": "close", "OMP_PLACES": "threads"}])
def test_openmp_binding_does_not_pin_every_thread_to_one_cpu(models, binding):
    # libgomp binds the initial thread to its first place, and every thread
    # the daemon starts inherits it: convd removes the binding, with a note,
    # and its threads keep the whole mask (runtime/omp-env.c).
    mask = os.sched_getaffinity(0)
    with TestDaemon(models_dir=models, env=binding) as d, Wire.connect(d) as w:
        c = compute(w)
        assert c["threads"] == default_threads(c, len(mask)) and c["affinity_cpus"] == len(mask)
        masks = task_masks(d)
        assert all(m == mask for m in masks.values()), masks
        x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
        (y,) = infer_wave(w, [x], 1)
        assert y.shape[0] == 1
        for k, v in binding.items():
            assert f"ignoring {k}={v}" in d.stderr_text()


def test_gomp_cpu_affinity_keeps_the_cpus_it_names(models):
    # The CPUs named stay the daemon's (as with taskset), without pinning
    # every thread to the first one.
    cpu = max(os.sched_getaffinity(0))
    with TestDaemon(models_dir=models, env={"GOMP_CPU_AFFINITY": str(cpu)}) as d, Wire.connect(d) as w:
        assert compute(w)["threads"] == 1
        assert all(m == {cpu} for m in task_masks(d).values())
        assert f"ignoring GOMP_CPU_AFFINITY={cpu}" in d.stderr_text()


def quota_cgroup(tmp_name, cpus):
    """A new cgroup with a CPU quota of `cpus` (v2 cpu.max, else v1's cpu
    controller), or None with the reason it cannot be made here."""
    v2 = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(v2, "cgroup.controllers")):
        if "cpu" not in open(os.path.join(v2, "cgroup.subtree_control")).read().split():
            return None, "cgroup v2 without the cpu controller for child groups"
        root, files = v2, lambda d: {os.path.join(d, "cpu.max"): "%d 100000" % int(cpus * 100000)}
    elif os.path.exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        root = "/sys/fs/cgroup/cpu"
        files = lambda d: {os.path.join(d, "cpu.cfs_period_us"): "100000",
                           os.path.join(d, "cpu.cfs_quota_us"): str(int(cpus * 100000))}
    else:
        return None, "no cgroup cpu controller mounted"
    d = os.path.join(root, tmp_name)
    try:
        os.mkdir(d)
        for path, text in files(d).items():
            with open(path, "w") as f:
                f.write(text)
    except OSError as e:
        try:
            os.rmdir(d)
        except OSError:
            pass
        return None, f"cannot make a cgroup with a CPU quota here ({e.strerror}: needs root and a writable cgroupfs)"
    return d, None


class QuotaDaemon(TestDaemon):
    """A daemon started inside a cgroup (it joins before it execs)."""

    def __init__(self, cgroup, **kw):
        super().__init__(**kw)
        self.cgroup = cgroup

    def command(self):
        join = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
        return ["sh", "-c", join, self.cgroup] + super().command()


def test_default_threads_follow_the_cgroup_cpu_quota(models):
    # A container's CPU limit (a CFS quota) does not show in the affinity
    # mask: threads beyond it run in bursts and are throttled for the rest
    # of each period. The default stops at the quota, rounded down.
    cpus = len(os.sched_getaffinity(0))
    cg, why = quota_cgroup(f"convd-test-{os.getpid()}", 1.5)
    if cg is None:
        pytest.skip(why)
    try:
        with QuotaDaemon(cg, models_dir=models) as d, Wire.connect(d) as w:
            c = compute(w)
            assert c["quota_millicpus"] == 1500
            assert c["threads"] == 1 and c["affinity_cpus"] == cpus
            assert "with a CPU quota of 1.50" in d.stderr_text()
            x = RNG.standard_normal((1, C, HW, HW)).astype(np.float32)
            (y,) = infer_wave(w, [x], 1)
            assert y.shape[0] == 1
        with QuotaDaemon(cg, models_dir=models, args=["--threads", "2"]) as d, Wire.connect(d) as w:
            assert compute(w)["threads"] == 2  # asked for: kept, with a warning
            assert "more than the cgroup's CPU quota" in d.stderr_text()
    finally:
        os.rmdir(cg)


@pytest.mark.parametrize("lanes", ["on", "off"])
def test_concurrent_runs_equal_runs_alone(models, ort_session, lanes):
    # Four workers, two threads, batches of one: runs of several workers wait
    # at the executor together.
    args = ["--workers", "4", "--threads", "2", "--max-batch", "1", "--lanes", lanes]
    with TestDaemon(models_dir=models, args=args) as d, Wire.connect(d, timeout=120) as w:
        threads_before = thread_count(d)
        xs = [RNG.standard_normal((1, C, HW, HW)).astype(np.float32) for _ in range(WAVE)]
        alone = [infer_wave(w, [x], 1000 + i)[0] for i, x in enumerate(xs)]
        for x, y in zip(xs, alone):
            assert rel_err(y, ort_session.run(None, {"x": x})[0]) <= 1e-4
        # Waves until the executor has run some in lanes (state, not time;
        # MAX_WAVES is a hang guard: one wave almost always does it).
        waves = 0
        while waves < MAX_WAVES:
            got = infer_wave(w, xs, 10000 + waves * WAVE)
            for y, ref in zip(got, alone):
                assert rel_err(y, ref) <= 1e-4
            waves += 1
            c = compute(w)
            if lanes == "off" or c["lane_jobs"] > 0:
                break
        c = compute(w)
        assert c["queued"] == 0 and c["running"] == 0
        assert c["jobs"] == c["wide_jobs"] + c["lane_jobs"] + c["caller_jobs"]
        if lanes == "on":
            assert c["lane_jobs"] >= 2, c
            assert c["lane_spans"] >= 1
        else:
            assert c["lane_jobs"] == 0, c
        # Compute threads: the executor's team, never one per worker.
        assert thread_count(d) == threads_before


def test_more_workers_add_no_compute_threads(models):
    counts = {}
    for workers in (1, 4):
        args = ["--workers", str(workers), "--threads", "2"]
        with TestDaemon(models_dir=models, args=args) as d, Wire.connect(d, timeout=120) as w:
            xs = [RNG.standard_normal((1, C, HW, HW)).astype(np.float32) for _ in range(WAVE)]
            infer_wave(w, xs, 1)
            counts[workers] = thread_count(d)
    # The threads of the 3 extra workers, and not one more.
    assert counts[4] - counts[1] == 3, counts
