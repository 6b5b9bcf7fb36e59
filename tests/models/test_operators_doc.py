"""docs/OPERATORS.md is `convctl ops --markdown` (so it cannot drift from the code), and the
loader's refusal of an unknown operator names every supported one."""
import subprocess

import numpy as np
import onnx
import pytest

from tests.models import builders as B
from tests.support import paths

DOC = paths.ROOT / "docs" / "OPERATORS.md"


def ops_output(*args):
    r = subprocess.run([paths.binary("convctl"), "ops", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def table_rows():
    rows = []
    for line in ops_output("--markdown").splitlines():
        if line.startswith("| ") and not line.startswith("| operator"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_operators_md_is_the_generated_listing():
    want = ops_output("--markdown")
    got = DOC.read_text()
    assert got == want, ("docs/OPERATORS.md differs from `convctl ops --markdown`: regenerate it with "
                         "build/bin/convctl ops --markdown > docs/OPERATORS.md")


def test_listing_knows_every_op_and_its_backends():
    rows = table_rows()
    assert len(rows) >= 60
    for op, dom, opsets, attrs, runs_as, backends in rows:
        assert runs_as != "?" and backends != "?", (op, runs_as, backends)
        if dom == "ai.onnx":
            lo, hi = map(int, opsets.split("-"))
            assert 11 <= lo <= hi <= 21, (op, opsets)
    by_op = {r[0]: r for r in rows}
    assert by_op["Gather"][4] == "Gather" and by_op["Expand"][4] == "Tile", (by_op["Gather"], by_op["Expand"])
    assert by_op["Gelu"][2] == "20-21" and by_op["LayerNormalization"][2] == "17-21"
    assert "axes (11-12)" in by_op["Unsqueeze"][3]


def test_unsupported_op_message_lists_every_supported_op(tmp_path):
    """The list is as long as the table (over 500 characters): once cut at 1024, now whole."""
    g = B.Graph(np.random.default_rng(0), 13)
    x = g.input("x", [3, 4, 4])
    y = g.node("Relu", [g.node("HardMax", [x], name="the_node", axis=1)])
    m = g.build([y], out_shapes={y: ["N", 3, 4, 4]})
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    r = subprocess.run([paths.binary("convd-run"), str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "E_UNSUPPORTED" in r.stderr and "the_node" in r.stderr and "HardMax" in r.stderr, r.stderr
    listed = r.stderr.split("supported: ", 1)[1].rsplit(")", 1)[0].split(", ")
    default_ops = [row[0] for row in table_rows() if row[1] == "ai.onnx"]
    assert listed == default_ops, (listed, default_ops)
    assert f"the {len(default_ops)} supported" in r.stderr
