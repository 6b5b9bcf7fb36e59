"""Issue 22, second part: Expand, Tile, Where, Equal/Less/Greater/Not, Range and
ConstantOfShape folded at load where they compute shapes or constants, Expand and
Tile of activations as a broadcast copy, Gather over activations (any axis but the
batch, scalar / 1-D / 2-D indices, negative, int32), each as small models on fresh
random shapes vs onnxruntime (batch 1 and > 1); and the refusals that name the
node and the reason."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.models import builders as B
from tests.models.runner import convd_run
from tests.models.test_ops import fails, ints, layers, ri, run


def kinds(path):
    return [l["op"] for l in layers(path)]


# ---- Expand and Tile -------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 17, 18, 21])
def test_expand_of_an_activation_to_another_inputs_shape(opset, rng, tmp_path):
    """SE-style [N,C,1,1] -> [N,C,H,W], the target from Shape(y) (its batch dim is the batch)."""
    g = B.Graph(rng, opset)
    c, h, w = ri(rng, 1, 9), ri(rng, 2, 9), ri(rng, 2, 9)
    x = g.input("x", [c, 1, 1])
    y = g.input("y", [c, h, w])
    e = g.node("Expand", [g.node("Relu", [x]), g.node("Shape", [y])])
    path = run(rng, tmp_path, g.build([g.node("Mul", [e, y])]))
    assert "Expand" in kinds(path), kinds(path)


def test_expand_with_a_constant_shape_and_lower_rank_target(rng, tmp_path):
    g = B.Graph(rng, 13)
    c, h = ri(rng, 1, 6), ri(rng, 2, 7)
    x = g.input("x", [c, 1, h])
    # A target of lower rank broadcasts too (numpy rules): [1, w, 1] against [N, c, 1, h].
    y = g.node("Expand", [x, ints(g, [1, 3, 1])])
    run(rng, tmp_path, g.build([y]))


def test_expand_that_changes_nothing_is_an_alias(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [3, 4, 5])
    y = g.node("Expand", [x, ints(g, [1, 1, 1])])
    path = run(rng, tmp_path, g.build([g.node("Relu", [y])]))
    assert "Expand" not in kinds(path), kinds(path)


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_tile_of_an_activation(opset, rng, tmp_path):
    g = B.Graph(rng, opset)
    s = [ri(rng, 1, 5), ri(rng, 1, 5), ri(rng, 1, 5)]
    x = g.input("x", s)
    rep = [ri(rng, 1, 3) for _ in s]
    rep[ri(rng, 0, 2)] = ri(rng, 2, 3)  # at least one dim repeats (all ones: an alias, no layer)
    y = g.node("Tile", [x, ints(g, [1] + rep)])
    path = run(rng, tmp_path, g.build([y]))
    assert "Tile" in kinds(path), kinds(path)


def test_expand_and_tile_of_constants_fold(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [4, 3, 6])
    b = g.node("Expand", [g.init(rng.uniform(-1, 1, [1, 1, 6]).astype(np.float32)), ints(g, [1, 3, 1])])
    t = g.node("Tile", [g.init(rng.uniform(-1, 1, [1, 3, 1]).astype(np.float32)), ints(g, [4, 1, 1])])
    y = g.node("Add", [g.node("Mul", [x, b]), g.node("Unsqueeze", [t, ints(g, [0])])])
    path = run(rng, tmp_path, g.build([y]))
    assert not {"Expand", "Tile"} & set(kinds(path)), kinds(path)


# ---- Gather over activations -------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize("form", ["scalar", "list", "table", "negative", "int32"])
def test_gather_of_an_activation(form, opset, rng, tmp_path):
    g = B.Graph(rng, opset)
    s = [ri(rng, 1, 6), ri(rng, 1, 6), ri(rng, 1, 6)]
    x = g.input("x", s)
    axis = ri(rng, 1, 3)
    n = s[axis - 1]
    if form == "scalar":
        idx = np.array(ri(rng, 0, n - 1), np.int64)
    elif form == "list":
        idx = rng.integers(0, n, ri(rng, 1, 5)).astype(np.int64)
    elif form == "table":
        idx = rng.integers(0, n, (2, 3)).astype(np.int64)
    elif form == "negative":
        idx = rng.integers(-n, n, ri(rng, 1, 5)).astype(np.int64)
    else:
        idx = rng.integers(-n, n, ri(rng, 1, 5)).astype(np.int32)
    y = g.node("Gather", [g.node("Relu", [x]), g.init(idx, "idx")], axis=axis - 4 if form == "negative" else axis)
    path = run(rng, tmp_path, g.build([y]))
    assert "Gather" in kinds(path), kinds(path)


def test_gather_of_a_constant_tensor_folds(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [3, 5])
    tab = g.init(rng.uniform(-1, 1, [4, 3, 5]).astype(np.float32))
    y = g.node("Add", [x, g.node("Gather", [tab, g.init(np.array(2, np.int64))], axis=0)])
    path = run(rng, tmp_path, g.build([y]))
    assert "Gather" not in kinds(path), kinds(path)


# ---- shape computations folded -------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 17, 18, 21])
def test_torch_expand_shape_subgraph_folds(opset, rng, tmp_path):
    """torch's x.expand(-1, -1, H, W) exports Where(Equal(shape, -1), ConstantOfShape*..., shape) in front of
    an Expand; with the batch in the shape, all of it folds at load."""
    g = B.Graph(rng, opset)
    c, h, w = ri(rng, 1, 8), ri(rng, 2, 8), ri(rng, 2, 8)
    x = g.input("x", [c, 1, 1])
    y = g.input("y", [c, h, w])
    shp = g.node("Shape", [y])
    four = g.node("ConstantOfShape", [ints(g, [1])], value=helper.make_tensor("v", TensorProto.INT64, [1], [4]))
    ones = g.node("ConstantOfShape", [four], value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
    neg = g.node("Mul", [ones, ints(g, -1)])
    tgt = g.node("Where", [g.node("Equal", [shp, neg]), ones, shp])
    e = g.node("Expand", [x, tgt])
    path = run(rng, tmp_path, g.build([g.node("Add", [e, y])]))
    ops = kinds(path)
    assert not {"Where", "Equal", "ConstantOfShape"} & set(ops), ops


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_range_less_greater_not_cast_fold(opset, rng, tmp_path):
    """Range of shape values, a comparison mask, Not and Cast: a constant the activation is scaled by."""
    g = B.Graph(rng, opset)
    w = ri(rng, 2, 9)
    x = g.input("x", [3, w])
    shp = g.node("Shape", [x])
    n = g.node("Gather", [shp, g.init(np.array(2, np.int64))], axis=0)
    r = g.node("Range", [g.init(np.array(0, np.int64)), n, g.init(np.array(1, np.int64))])
    half = g.init(np.array(w // 2, np.int64))
    gt = g.node("Cast", [g.node("Cast", [g.node("Greater", [r, half])], to=TensorProto.INT64)], to=TensorProto.BOOL)
    m = g.node("Not", [gt])
    lo = g.node("Cast", [g.node("Less", [r, half])], to=TensorProto.FLOAT)
    mask = g.node("Add", [g.node("Cast", [m], to=TensorProto.FLOAT), lo])
    fr = g.node("Range", [g.init(np.array(0.5, np.float32)), g.init(np.array(w / 2 + 0.5, np.float32)),
                          g.init(np.array(0.5, np.float32))])
    y = g.node("Add", [g.node("Mul", [x, mask]), fr])
    path = run(rng, tmp_path, g.build([y]))
    ops = kinds(path)
    assert not {"Range", "Less", "Greater", "Not", "Cast"} & set(ops), ops


def test_where_of_constants_folds_and_one_sided_where_on_an_activation(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [2, 3])
    cond = g.init(rng.integers(0, 2, [2, 1]).astype(bool), "c")
    k = g.node("Where", [cond, g.init(rng.uniform(-1, 1, [1, 3]).astype(np.float32)),
                         g.init(rng.uniform(-1, 1, [2, 3]).astype(np.float32))])
    same = g.node("Where", [g.init(np.ones([1, 2, 3], bool), "t"), x, g.init(np.zeros([1], np.float32))])
    y = g.node("Add", [same, k])
    path = run(rng, tmp_path, g.build([y]))
    assert "Where" not in kinds(path), kinds(path)


# ---- refusals -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["where_tensor_cond", "where_mixed", "equal_act", "gather_batch", "gather_act_idx",
                                  "tile_batch", "expand_batch", "range_batch"])
def test_shape_op_refusals_name_the_node(case, rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [3, 4, 4])
    out_shape = ["N", 3, 4, 4]
    if case == "where_tensor_cond":
        c = g.node("Greater", [x, g.init(np.zeros([1], np.float32))])
        y = g.node("Where", [c, x, g.init(np.zeros([1], np.float32))], name="the_node")
        want = ["Greater", "activation"]
    elif case == "where_mixed":
        c = g.init(np.array([True, False, True, False]), "c")
        y = g.node("Where", [c, x, g.init(np.zeros([1], np.float32))], name="the_node")
        want = ["the_node", "element by element"]
    elif case == "equal_act":
        y = g.node("Cast", [g.node("Equal", [x, x], name="the_node")], to=TensorProto.FLOAT)
        want = ["the_node", "activation"]
    elif case == "gather_batch":
        y = g.node("Gather", [x, g.init(np.array([0], np.int64))], axis=0, name="the_node")
        want = ["the_node", "batch"]
        out_shape = [1, 3, 4, 4]
    elif case == "gather_act_idx":
        idx = g.node("Cast", [x], to=TensorProto.INT64)
        y = g.node("Gather", [g.init(np.zeros([5, 2], np.float32)), idx], axis=0, name="the_node")
        want = ["Cast"]
        out_shape = None
    elif case == "tile_batch":
        y = g.node("Tile", [x, ints(g, [2, 1, 1, 1])], name="the_node")
        want = ["the_node", "batch"]
    elif case == "expand_batch":
        y = g.node("Expand", [x, ints(g, [2, 1, 1, 1])], name="the_node")
        want = ["the_node", "batch"]
    else:
        n = g.node("Gather", [g.node("Shape", [x]), g.init(np.array(0, np.int64))], axis=0)
        r = g.node("Range", [g.init(np.array(0, np.int64)), n, g.init(np.array(1, np.int64))], name="the_node")
        y = g.node("Add", [x, g.node("Cast", [g.node("Unsqueeze", [r, ints(g, [1, 2, 3])])], to=TensorProto.FLOAT)])
        want = ["the_node", "batch"]
    m = g.build([y], out_shapes={y: out_shape} if out_shape else None)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    fails(path, "E_UNSUPPORTED", *want)
