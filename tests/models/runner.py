"""Runs convd-run on a model and compares with onnxruntime on the same inputs."""
import json
import os
import subprocess

import numpy as np
import onnxruntime as ort

from tests.support import paths

TOL = 1e-4  # |convd - ort| <= TOL * max(1, |ort|)


def convd_run(model, args=(), env=None, check=True):
    e = dict(os.environ)
    if env:
        e.update(env)
    r = subprocess.run([paths.binary("convd-run"), str(model), *map(str, args)], capture_output=True, text=True,
                       errors="replace", timeout=600, env=e)
    if check:
        assert r.returncode == 0, f"convd-run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def random_inputs(model_path, batch, rng):
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        shape = [batch] + [int(d) for d in i.shape[1:]]
        feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return sess, feeds


def compare(model_path, tmp_path, batch, rng, kernels=None, extra=()):
    """Runs both engines on fresh random inputs; asserts the tolerance; returns the max relative error."""
    sess, feeds = random_inputs(model_path, batch, rng)
    args = []
    for name, arr in feeds.items():
        p = tmp_path / f"in_{len(args)}.npy"
        np.save(p, arr)
        args += ["--input", f"{name}={p}"]
    out_dir = tmp_path / f"out_b{batch}_{kernels or 'fast'}"
    env = {"CONVD_CPU_KERNELS": kernels} if kernels else None
    r = convd_run(model_path, args + ["--output-dir", out_dir, "--batch", batch, "--json", *extra], env=env)
    info = json.loads(r.stdout)
    ref = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    worst = 0.0
    for name, want in zip(names, ref):
        entry = next(o for o in info["outputs"] if o["name"] == name)
        got = np.load(entry["file"])
        assert got.shape == want.shape, (name, got.shape, want.shape)
        err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
        worst = max(worst, float(err.max()))
        assert err.max() <= TOL, f"{name}: max relative error {err.max():.3g} > {TOL} (batch {batch})"
    return worst
