"""convctl (tools/convctl) against a real daemon: human tables, --json, exit
codes (0 ok, 1 failed, 2 usage, 3 cannot connect), --help everywhere."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

import convd
from tests.integration import client_models
from tests.support import paths

COMMANDS = ["hello", "health", "models", "stats", "load", "unload", "infer"]


@pytest.fixture
def d(scale2_daemon):
    return scale2_daemon


def ctl(*args, socket=None, env=None):
    e = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    e.update(env or {})
    cmd = [paths.binary("convctl")]
    if socket:
        cmd += ["--socket", socket]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, env=e)


def aligned(lines):
    """True when the value column of 'key  value' lines starts at one offset."""
    starts = {re.match(r"\S+\s+", ln).end() for ln in lines if ln.strip()}
    return len(starts) == 1


def test_hello_table(d):
    r = ctl("hello", socket=d.socket)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == ["server", "version", "protocol", "device",
                                              "features"]
    assert aligned(lines)
    assert lines[0].split()[1] == "convd"
    assert "cpu" in lines[4].split()[1:]


def test_health_table(d):
    r = ctl("health", socket=d.socket)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["status", "ok"]
    assert aligned(lines)
    assert lines[2].split() == ["models", str(len(convd.Client(d.socket).models()))]


def test_socket_from_env(d):
    r = ctl("health", env={"CONVD_SOCKET": d.socket})
    assert r.returncode == 0, r.stderr


def test_options_after_command(d):
    r = ctl("health", "--json", "--socket", d.socket)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "ok"


def test_models_table(d):
    r = ctl("models", socket=d.socket)
    assert r.returncode == 0, r.stderr
    models = convd.Client(d.socket).models()
    if not models:
        assert r.stdout.strip() == "no models loaded"
        return
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "INPUTS", "OUTPUTS"]
    assert len(lines) == 1 + len(models)
    assert {ln.split()[0] for ln in lines[1:]} == {m["name"] for m in models}


def test_stats_sections(d):
    assert ctl("hello", socket=d.socket).returncode == 0  # a nonzero hello count
    r = ctl("stats", socket=d.socket)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^uptime_s\s+\S", r.stdout, re.M)
    assert re.search(r"^connections:$", r.stdout, re.M)
    assert re.search(r"^requests:$", r.stdout, re.M)
    assert re.search(r"^    hello\s+[1-9]\d*$", r.stdout, re.M)  # requests.by_method


@pytest.mark.parametrize("cmd", ["hello", "health", "models", "stats"])
def test_json_parsable_and_equal_to_the_client(d, cmd):
    r = ctl("--json", cmd, socket=d.socket)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    with convd.Client(d.socket) as c:
        want = c.call(cmd)
    assert set(got) == set(want)
    if cmd == "hello":
        assert got == want
    if cmd == "models":
        assert got == want


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_for_every_command(cmd):
    for args in ([cmd, "--help"], ["help", cmd]):
        r = ctl(*args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: convctl")
        assert f" {cmd}" in r.stdout.splitlines()[0]


def test_help_lists_every_command():
    r = ctl("--help")
    assert r.returncode == 0
    for cmd in COMMANDS:
        assert re.search(rf"^  {cmd}\s", r.stdout, re.M), cmd
    assert "exit status" in r.stdout


@pytest.mark.parametrize("args", [
    [], ["frobnicate"], ["--frob", "health"], ["health", "extra"], ["load", "onlyname"],
    ["load", "n", "p", "--max-batch", "zero"], ["unload"], ["infer", "m"],
    ["infer"], ["--timeout", "-5", "health"], ["--socket"],
])
def test_usage_errors_exit_2(args):
    r = ctl(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert r.stderr.startswith("convctl") or r.stderr.startswith("usage")


def test_cannot_connect_exit_3(tmp_path):
    path = str(tmp_path / "nobody.sock")
    for cmd in ["hello", "health", "models", "stats"]:
        r = ctl(cmd, socket=path)
        assert r.returncode == 3, r.stderr
        assert r.stderr.startswith(f"convctl: E_CONNECT: cannot connect to {path}: ")
        assert r.stdout == ""


def test_server_error_exit_1(d):
    # The daemon answers unload of an unknown model with an error (E_NOT_FOUND
    # once models exist; E_UNSUPPORTED from a build without the runtime).
    r = ctl("unload", "no_such_model", socket=d.socket)
    assert r.returncode == 1
    assert re.match(r"convctl: E_[A-Z_]+: \S", r.stderr), r.stderr


def test_unreadable_input_file_exit_1(d, tmp_path):
    r = ctl("infer", "scale2", "--input", f"x={tmp_path}/missing.npy", socket=d.socket)
    assert r.returncode == 1
    assert r.stderr.startswith("convctl: E_IO: ")
    assert "missing.npy" in r.stderr


def test_unload_unknown_model(d):
    r = ctl("unload", "no_such_model", socket=d.socket)
    assert r.returncode == 1
    assert r.stderr.startswith("convctl: E_NOT_FOUND: ")
    assert "no_such_model" in r.stderr


def test_infer_npy_round_trip(d, tmp_path):
    x = np.random.default_rng().standard_normal((2, 3, 5, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = ctl("infer", "scale2", "--input", str(tmp_path / "x.npy"),
            "--output", str(tmp_path / "y.npy"), socket=d.socket)
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    ref = client_models.scale2_reference(x)
    assert y.shape == ref.shape and y.dtype == np.float32
    assert np.all(np.abs(y - ref) <= 1e-4 * np.maximum(1, np.abs(ref)))
    assert r.stdout.splitlines()[0].split()[:3] == ["OUTPUT", "DTYPE", "SHAPE"]
    # Named, and --json.
    r = ctl("--json", "infer", "scale2", "--input", f"x={tmp_path}/x.npy",
            "--output", f"y={tmp_path}/y2.npy", socket=d.socket)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)["outputs"]["y"]
    assert info["shape"] == [2, 3, 5, 7] and info["dtype"] == "f32"
    assert info["max"] == pytest.approx(float(ref.max()), rel=1e-5)
    np.testing.assert_array_equal(np.load(tmp_path / "y2.npy"), y)


def test_infer_unknown_model_message(d, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 3, 5, 7), np.float32))
    r = ctl("infer", "x", "--input", str(tmp_path / "x.npy"), socket=d.socket)
    assert r.returncode == 1
    assert r.stderr.strip() == "convctl: E_NOT_FOUND: no such model 'x'"


def test_infer_shape_error(d, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 3, 7, 5), np.float32))
    r = ctl("infer", "scale2", "--input", f"x={tmp_path}/x.npy", socket=d.socket)
    assert r.returncode == 1
    assert r.stderr.startswith("convctl: E_SHAPE: ")


def test_load_unload(d):
    r = ctl("load", "copy", "scale2.onnx", "--max-batch", "3", socket=d.socket)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("loaded copy from ") and "scale2.onnx" in r.stdout
    r = ctl("--json", "models", socket=d.socket)
    entry = [m for m in json.loads(r.stdout)["models"] if m["name"] == "copy"][0]
    assert entry["max_batch"] == 3
    r = ctl("models", socket=d.socket)
    # The batch dim prints as N when the daemon reports it open, else a number.
    assert re.search(r"^copy\s+x:f32\[\w+, 3, 5, 7\]\s+y:f32\[\w+, 3, 5, 7\]\s+3\s",
                     r.stdout, re.M), r.stdout
    r = ctl("unload", "copy", socket=d.socket)
    assert r.returncode == 0 and r.stdout.strip() == "unloaded copy"
    r = ctl("load", "bad", "../x.onnx", socket=d.socket)
    assert r.returncode == 1 and r.stderr.startswith("convctl: E_ACCESS: ")
