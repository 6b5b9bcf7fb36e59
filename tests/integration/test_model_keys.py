"""The per-model keys (`<model>.conf` and `load` params) are rows of the
daemon's settings table: each has the range, the parser and the default of
its daemon-wide flag. Read from `convd --settings-markdown` (the table as the
daemon has it), every key's bounds are tried through both doors, one past each
end refused and the ends themselves accepted, and the flag's value is the
default of a model that sets nothing."""
import re
import subprocess

import numpy as np
import pytest

from tests.integration.daemon_wire import Wire
from tests.models.builders import Graph, save
from tests.support.daemon import TestDaemon
from tests.support.paths import binary


def model_keys():
    """{key: (flag, lo, hi)} of the INT per-model keys, and the text keys."""
    out = subprocess.run([binary("convd"), "--settings-markdown"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    ints, texts = {}, []
    for line in out.stdout.splitlines():
        m = re.search(r"per model: `(\w+)`", line)
        if not m:
            continue
        cells = [c.strip() for c in line.split("|")]
        flag, rng = cells[1].strip("`"), cells[3]
        r = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(.*)", rng)
        if r:
            ints[m[1]] = (flag, int(r[1]), int(r[2]))
        else:
            texts.append(m[1])
    return ints, texts


INTS, TEXTS = model_keys()


def test_the_table_names_the_keys_models_have():
    assert set(INTS) == {"max_batch", "max_delay_us", "max_queue", "max_shapes"}
    assert TEXTS == ["input_shape"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    g = Graph(np.random.default_rng(5))
    x = g.input("x", [2, 6, 6])
    save(g.build([g.relu(g.conv(x, 2, 3, 3))], "tiny"), d / "tiny.onnx")
    for key, (_, lo, hi) in INTS.items():
        (d / f"over-{key}.onnx").write_bytes((d / "tiny.onnx").read_bytes())
        (d / f"over-{key}.onnx.conf").write_text(f"{key} = {hi + 1}\n")
    return d


@pytest.fixture(scope="module")
def d(models):
    with TestDaemon(models_dir=models, args=["--max-queue", "77", "--max-delay-us", "12"]) as daemon:
        yield daemon


@pytest.mark.parametrize("key", sorted(INTS))
def test_a_conf_file_past_the_range_is_refused_naming_file_line_and_range(d, key):
    _, lo, hi = INTS[key]
    assert f"over-{key}.onnx.conf:1: {key}: {hi + 1} is out of range {lo}..{hi}" in d.stderr_text()


@pytest.mark.parametrize("key", sorted(INTS))
def test_load_params_take_the_ends_and_refuse_one_past(d, key):
    _, lo, hi = INTS[key]
    with Wire.connect(d) as w:
        assert w.error("load", {"name": "k", "path": "tiny.onnx", key: hi + 1}) == "E_PARAMS"
        assert w.error("load", {"name": "k", "path": "tiny.onnx", key: lo - 1}) == "E_PARAMS"
        for v in (lo, hi):
            w.result("load", {"name": "k", "path": "tiny.onnx", key: v})
            if key != "max_shapes":  # shown for models with symbolic dims only
                assert w.result("stats")["models"]["k"][key] == v
        w.result("unload", {"name": "k"})


def test_the_daemon_wide_values_are_the_defaults_of_a_model(d):
    with Wire.connect(d) as w:
        s = w.result("stats")["models"]["tiny"]
        assert (s["max_queue"], s["max_delay_us"]) == (77, 12)


def test_a_bad_input_shape_is_refused_by_flag_conf_and_load_alike(tmp_path, d):
    # The flag: the daemon does not start (exit 2), naming the setting.
    r = subprocess.run([binary("convd"), "--socket", str(tmp_path / "s.sock"), "--input-shape", "1x3xHxW"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "input-shape" in r.stderr, r.stderr
    with Wire.connect(d) as w:
        assert w.error("load", {"name": "k", "path": "tiny.onnx", "input_shape": "1x3xHxW"}) == "E_PARAMS"
        assert w.error("load", {"name": "k", "path": "tiny.onnx", "input_shape": "x" * 300}) == "E_PARAMS"
