"""tools/common/npy.c (through convd-run, which reads inputs and writes outputs
with it) and the convd-run command line."""
import json

import numpy as np
import pytest

from tests.models import builders as B
from tests.models.runner import convd_run
from tests.models.test_errors import fails


@pytest.fixture
def relu_model(tmp_path):
    g = B.Graph(np.random.default_rng(0))
    x = g.input("x", [2, 3, 4])
    y = g.relu(x)
    return B.save(g.build([y]), tmp_path / "relu.onnx")


def header(descr, shape, fortran=False, version=1, pad_to=64):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    pre = 10 if version == 1 else 12
    hl = len(d) + 1
    hl += (pad_to - (pre + hl) % pad_to) % pad_to
    d = d + " " * (hl - len(d) - 1) + "\n"
    ln = len(d).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + ln + d.encode()


def test_npy_v1_v2_and_output_round_trip(relu_model, tmp_path):
    x = np.random.default_rng(1).standard_normal((3, 2, 3, 4)).astype(np.float32)
    np.save(tmp_path / "v1.npy", x)
    with open(tmp_path / "v2.npy", "wb") as f:
        np.lib.format.write_array(f, x, version=(2, 0))
    for name in ("v1", "v2"):
        convd_run(relu_model, ["--input", tmp_path / f"{name}.npy", "--output", tmp_path / f"y_{name}.npy"])
        y = np.load(tmp_path / f"y_{name}.npy")
        assert y.dtype == np.float32 and y.shape == x.shape
        assert np.array_equal(y, np.maximum(x, 0))


def test_npy_hand_written_header_any_key_order(relu_model, tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) - 10
    d = b"{'shape': (1, 2, 3, 4), 'fortran_order': False, 'descr': '<f4'}"
    d += b" " * ((64 - (10 + len(d) + 1) % 64) % 64) + b"\n"
    (tmp_path / "h.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d + x.tobytes())
    convd_run(relu_model, ["--input", tmp_path / "h.npy", "--output", tmp_path / "y.npy"])
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.maximum(x, 0))


@pytest.mark.parametrize("case,code,needle", [
    ("fortran", "E_PARAMS", "fortran"),
    ("big_endian", "E_DTYPE", ">f4"),
    ("truncated", "E_PARAMS", "data is"),
    ("trailing", "E_PARAMS", "data is"),
    ("magic", "E_PARAMS", "magic"),
    ("rank9", "E_TOO_LARGE", "rank"),
    ("negative_dim", "E_PARAMS", "dimension"),
    ("bad_version", "E_PARAMS", "version"),
    ("no_shape", "E_PARAMS", "shape"),
    ("header_len", "E_PARAMS", "truncated"),
])
def test_npy_malformed(relu_model, tmp_path, case, code, needle):
    data = np.zeros(24, np.float32).tobytes()
    blobs = {
        "fortran": header("<f4", "(1, 2, 3, 4)", fortran=True) + data,
        "big_endian": header(">f4", "(1, 2, 3, 4)") + data,
        "truncated": header("<f4", "(1, 2, 3, 4)") + data[:-1],
        "trailing": header("<f4", "(1, 2, 3, 4)") + data + b"x",
        "magic": b"\x93NUMPX\x01\x00" + header("<f4", "(1, 2, 3, 4)")[8:] + data,
        "rank9": header("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 24)") + data,
        "negative_dim": header("<f4", "(1, -2, 3, 4)") + data,
        "bad_version": header("<f4", "(1, 2, 3, 4)")[:6] + b"\x07\x00" + header("<f4", "(1, 2, 3, 4)")[8:] + data,
        "no_shape": b"\x93NUMPY\x01\x00\x3c\x00" + b"{'descr': '<f4', 'fortran_order': False}".ljust(59) + b"\n" + data,
        "header_len": b"\x93NUMPY\x01\x00\xff\x7f{'descr'",
    }
    p = tmp_path / f"{case}.npy"
    p.write_bytes(blobs[case])
    if case == "big_endian":
        needle = "not supported"
    fails(relu_model, code, needle, args=["--input", p])


def test_cli_usage_errors(relu_model, tmp_path):
    r = convd_run(relu_model, ["--bogus"], check=False)
    assert r.returncode == 2 and "unknown option" in r.stderr
    r = convd_run(relu_model, ["--batch", "0"], check=False)
    assert r.returncode == 2
    r = convd_run(relu_model, ["--output", "a.npy", "--output-dir", "d"], check=False)
    assert r.returncode == 2
    r = convd_run(relu_model, ["--batch", "4", "--max-batch", "2"], check=False)
    assert r.returncode == 2
    r = convd_run(relu_model, ["--input", "nosuch=" + str(tmp_path / "x.npy")], check=False)
    assert r.returncode == 1


def test_cli_output_needs_single_output_model(tmp_path):
    g = B.Graph(np.random.default_rng(0))
    x = g.input("x", [2, 3, 3])
    p = B.save(g.build([g.relu(x), g.node("Sigmoid", [x])]), tmp_path / "two.onnx")
    fails(p, "E_PARAMS", "--output-dir", args=["--output", tmp_path / "y.npy"])
    r = convd_run(p, ["--output-dir", tmp_path / "out", "--batch", "2", "--json"])
    outs = json.loads(r.stdout)["outputs"]
    assert len(outs) == 2 and all(np.load(o["file"]).shape == (2, 2, 3, 3) for o in outs)


def test_cli_bench_and_info_json(relu_model):
    r = convd_run(relu_model, ["--bench", "5", "--warmup", "1", "--info", "--json", "--batch", "3", "--threads", "1"])
    info = json.loads(r.stdout)
    b = info["bench"]
    assert b["runs"] == 5 and 0 < b["min_ms"] <= b["median_ms"] <= b["p90_ms"] <= b["p99_ms"]
    assert info["layers"][0]["op"] == "Relu" and info["layers"][0]["out_shape"] == [1, 2, 3, 4]
    assert info["summary"]["max_batch"] == 3
    r = convd_run(relu_model, ["--info", "--bench", "3"])
    assert "median" in r.stdout and "Relu" in r.stdout


def test_cli_bench_gap_between_runs(relu_model):
    # --gap-us idles before each timed run (a daemon's idle time between one
    # client's requests); the runs still all happen and are timed.
    r = convd_run(relu_model, ["--bench", "3", "--warmup", "0", "--gap-us", "1500", "--json"])
    assert json.loads(r.stdout)["bench"]["runs"] == 3
    for bad in ("-1", "10000001", "x"):
        r = convd_run(relu_model, ["--bench", "3", "--gap-us", bad], check=False)
        assert r.returncode == 2 and "--gap-us" in r.stderr, (bad, r.stderr)


def test_cli_openmp_binding_is_removed_with_a_note(relu_model):
    # OpenMP's binding would pin every thread to one CPU (runtime/omp-env.c):
    # convd-run removes it, says so, and runs; "false" binds nothing.
    r = convd_run(relu_model, ["--bench", "2", "--json"], env={"OMP_PROC_BIND": "spread", "OMP_PLACES": "cores"})
    assert json.loads(r.stdout)["bench"]["runs"] == 2
    assert "ignoring OMP_PROC_BIND=spread" in r.stderr and "ignoring OMP_PLACES=cores" in r.stderr
    r = convd_run(relu_model, ["--bench", "2", "--json"], env={"OMP_PROC_BIND": "false", "OMP_DYNAMIC": "false"})
    assert "ignoring" not in r.stderr
    # OMP_DYNAMIC=true would size each team by the load average.
    r = convd_run(relu_model, ["--bench", "2", "--json"], env={"OMP_DYNAMIC": "TRUE"})
    assert json.loads(r.stdout)["bench"]["runs"] == 2 and "ignoring OMP_DYNAMIC=TRUE" in r.stderr
