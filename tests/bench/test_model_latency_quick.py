"""Smoke test of bench/model-latency.py: the whole-model benchmark runs end to
end on tiny models (all three engines, interleaved rounds, correctness check,
per-layer profiles, --json and --markdown), so the script cannot rot.

Timing numbers are not judged (the machine is shared); only that every engine
produced a positive time and convd's outputs match onnxruntime's."""
import json
import os
import subprocess
import sys

import pytest

from tests.support import paths

SCRIPT = paths.ROOT / "bench" / "model-latency.py"
TOL = 1e-4


# Only a hang guard: how long the whole benchmark takes depends on the
# machine and its load, and is not judged.
HANG_S = 1200


def run_bench(args, timeout=HANG_S):
    env = dict(os.environ)
    env["CONVD_BUILD"] = str(paths.BUILD)
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=timeout, env=env, cwd=str(paths.ROOT))


@pytest.mark.timeout(HANG_S + 300)
def test_quick_run_all_engines_json_markdown_profile(tmp_path):
    cache = tmp_path / "cache"
    out = tmp_path / "r.json"
    r = run_bench(["--quick", "--width", "0.25", "--batches", "1,2", "--threads", "1,2", "--iters", "2",
                   "--profile", "--profile-top", "5", "--markdown", "--json", out, "--cache", cache,
                   # Passive OpenMP waiting keeps the 2-thread runs fast on a loaded
                   # machine (spinning teams collapse there, docs/PERFORMANCE.md).
                   "--env", "OMP_WAIT_POLICY=passive"])
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    rep = json.loads(out.read_text())

    # Models are generated into the cache dir given, nowhere in the checkout.
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.onnx")) == ["mobilenetv2", "resnet50"]

    # Both daemons (threads 1 and 2) stopped cleanly (no crash, no sanitizer report).
    assert rep["meta"]["daemon_exit"] == {"1": 0, "2": 0}, r.stderr

    rows = rep["rows"]
    assert {(x["model"], x["batch"], x["threads"]) for x in rows} == {
        (m, b, t) for m in ("resnet50", "mobilenetv2") for b in (1, 2) for t in (1, 2)}
    for x in rows:
        what = f"{x['model']} b{x['batch']} t{x['threads']}"
        # Two rounds of every engine, each a positive median.
        for eng in ("inproc", "socket", "ort"):
            assert len(x["rounds"][eng]) == 2 and min(x["rounds"][eng]) > 0, (what, eng, x["rounds"])
        assert len(x["samples"]["socket"]) == 4 and len(x["samples"]["ort"]) == 4, what
        assert x["socket_na"] is None, (what, x["socket_na"])
        assert x["ratio_convd_ort"] > 0 and x["convd_socket_ms"] > 0
        # Correctness in the same run, through both convd paths.
        assert x["max_rel_err_inproc"] is not None and x["max_rel_err_socket"] is not None, what
        assert 0 <= x["max_rel_err"] <= TOL, (what, x["max_rel_err"])

    # Per-layer comparison at batch 1 for each model and thread count, with
    # the convs matched between the engines (same count of 1x1 convs).
    assert sorted(rep["profiles"]) == ["mobilenetv2 b1 t1", "mobilenetv2 b1 t2", "resnet50 b1 t1", "resnet50 b1 t2"]
    for p in rep["profiles"].values():
        assert p["convd_total_ms"] > 0 and p["ort_total_ms"] > 0
        convs = [x for x in p["rows"] if x["layers"].startswith("conv 1x1")]
        assert convs and all(x["convd_n"] == x["ort_n"] > 0 for x in convs), p["rows"]

    # --markdown: one table row per config, ready for docs/PERFORMANCE.md.
    lines = r.stdout.splitlines()
    assert "| model | batch | threads | convd in-process ms |" in r.stdout
    assert sum(1 for ln in lines if ln.startswith("| resnet50 |") or ln.startswith("| mobilenetv2 |")) == 8
    assert r.stdout.count("Per-layer, ") == 4
    assert rep["meta"]["convd_env"] == {"OMP_WAIT_POLICY": "passive"}
    assert "convd env OMP_WAIT_POLICY=passive" in r.stdout

    # --from-json prints the same tables again from the saved run.
    again = run_bench(["--from-json", out, "--markdown", "--profile-top", "5"])
    assert again.returncode == 0, again.stderr
    assert again.stdout == r.stdout


def test_unknown_model_is_a_usage_error(tmp_path):
    r = run_bench(["--quick", "--models", "vgg99", "--cache", tmp_path])
    assert r.returncode == 2
    assert "unknown model 'vgg99'" in r.stderr
    assert not any(tmp_path.iterdir())
