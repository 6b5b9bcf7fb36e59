"""One-node models of Resize (opsets 11, 13, 18, 19) and ConvTranspose (11,
13, 18) on fresh random shapes and attributes, run with convd-run and compared
with onnxruntime (max relative error <= 1e-4, batch 1 and > 1); sizes computed
from Shape ops as torchvision exports F.interpolate(size=...); the fusion of a
Relu into ConvTranspose; and the refusals (E_UNSUPPORTED naming the node).
Upsample is an opset 7-9 op that onnxruntime refuses in the opset-11+ models
convd loads: the same graph at opset 9 is onnxruntime's reference."""

from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from tests.models import builders as B
from tests.models.builders import ri
from tests.models.runner import compare, convd_run
from tests.models.test_ops import layers, run

# (tf_half_pixel_for_nearest too, which onnxruntime 1.31 refuses at every opset: the conformance table
# checks it against the reference.)
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize_inputs(g, x, opset, scales=None, sizes=None, empty_const=False):
    """Resize's inputs at this opset: roi and scales positional (empty constants) before 13."""
    empty_const = empty_const or opset < 13
    ins = [x]
    if opset < 13 or sizes is not None or scales is not None:
        ins.append(g.init(np.zeros(0, np.float32), "roi") if empty_const else "")
    if scales is not None:
        ins.append(g.init(np.array(scales, np.float32), "scales"))
    elif sizes is not None:
        ins.append(g.init(np.zeros(0, np.float32), "scales") if empty_const else "")
        ins.append(g.init(np.array(sizes, np.int64), "sizes"))
    return ins


def random_scale(rng):
    # integer, non-integer and downscaling factors
    return float(rng.choice([2.0, 3.0, 0.5, 1.5, 1.7, 0.6, 2.5, 1.0, 0.75]))


def rounds_on_a_tie(n_in, n_out, coord, nearest):
    """True when nearest resizing from n_in to n_out puts an output on a rounding boundary (x.5 for the round
    modes, an integer for floor/ceil) that the f32 source coordinate misses by an ulp: 7 -> 2 asymmetric is
    1 / (2/7) = 3.5 exactly, 3.4999998 in f32. Which side an engine lands on there is float noise, not a bug:
    onnxruntime itself takes the exact side for the round modes and the f32 side for floor and ceil."""
    f32, scale = np.float32, np.float32(n_out) / np.float32(n_in)
    for x in range(n_out):
        if coord == "asymmetric":
            exact, approx = Fraction(x * n_in, n_out), f32(x) / scale
        elif coord == "align_corners":
            if n_out == 1:
                continue
            exact, approx = Fraction(x * (n_in - 1), n_out - 1), f32(x) * f32(n_in - 1) / f32(n_out - 1)
        else:  # half_pixel, and pytorch_half_pixel when n_out > 1
            if coord == "pytorch_half_pixel" and n_out == 1:
                continue
            exact, approx = Fraction(2 * x + 1, 2) * Fraction(n_in, n_out) - Fraction(1, 2), (f32(x) + f32(0.5)) / scale - f32(0.5)
        boundary = exact.denominator == (2 if nearest.startswith("round") else 1)
        if boundary and Fraction(float(approx)) != exact:
            return True
    return False


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("by", ["scales", "sizes"])
def test_resize(opset, mode, coord, by, rng, tmp_path):
    g = B.Graph(rng, opset)
    c, h, w = ri(rng, 1, 6), ri(rng, 1, 11), ri(rng, 1, 11)
    x = g.input("x", [c, h, w])
    attrs = dict(mode=mode, coordinate_transformation_mode=coord)
    if mode == "nearest":
        attrs["nearest_mode"] = NEAREST[ri(rng, 0, 3)]
    if by == "scales":
        sc = [1.0, 1.0, random_scale(rng), random_scale(rng)]
        while int(sc[2] * h) < 1 or int(sc[3] * w) < 1:
            sc = [1.0, 1.0, random_scale(rng), random_scale(rng)]
        ins = resize_inputs(g, x, opset, scales=sc, empty_const=ri(rng, 0, 1))
    else:
        oh, ow = ri(rng, 1, 23), ri(rng, 1, 23)
        while mode == "nearest" and (rounds_on_a_tie(h, oh, coord, attrs["nearest_mode"]) or
                                     rounds_on_a_tie(w, ow, coord, attrs["nearest_mode"])):
            oh, ow = ri(rng, 1, 23), ri(rng, 1, 23)
        ins = resize_inputs(g, x, opset, sizes=[1, c, oh, ow], empty_const=ri(rng, 0, 1))
    hw_only = opset >= 18 and ri(rng, 0, 1)
    if hw_only:
        attrs["antialias"] = 0
        attrs["keep_aspect_ratio_policy"] = "stretch"
        # the values for H and W only
        t = onnx.numpy_helper.to_array(next(i for i in g.inits if i.name == ins[-1]))
        g.inits = [i for i in g.inits if i.name != ins[-1]]
        ins[-1] = g.init(t[2:], "hw")
        attrs["axes"] = [2, 3] if ri(rng, 0, 1) else [-2, -1]
    y = g.node("Resize", ins, **attrs)
    if by == "sizes" and not hw_only:
        # A constant batch size of 1 is onnxruntime's output batch: compare at batch 1 (convd keeps the batch).
        compare(B.save(g.build([y]), tmp_path / "m.onnx"), tmp_path, 1, rng)
        return
    run(rng, tmp_path, g.build([y]))


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_sizes_from_shape_ops(opset, mode, rng, tmp_path):
    """F.interpolate(y, size=x.shape[-2:]) as torch exports it: sizes = Concat(Shape(y)[0:2], Shape(x)[2:4])."""
    g = B.Graph(rng, opset)
    c = ri(rng, 2, 5)
    x = g.input("x", [3, ri(rng, 8, 20), ri(rng, 8, 20)])
    y = g.conv(x, 3, c, 3, stride=2)
    sx = g.node("Shape", [x])
    sy = g.node("Shape", [y])
    ints = lambda v: g.init(np.array(v, np.int64), "i")
    hw = g.node("Slice", [sx, ints([2]), ints([4]), ints([0])])
    nc = g.node("Slice", [sy, ints([0]), ints([2]), ints([0])])
    sizes = g.node("Concat", [nc, hw], axis=0)
    roi = g.init(np.zeros(0, np.float32), "roi")
    scales = g.init(np.zeros(0, np.float32), "scales")
    z = g.node("Resize", [y, roi, scales, sizes], mode=mode,
               coordinate_transformation_mode="pytorch_half_pixel" if mode == "linear" else "asymmetric",
               nearest_mode="floor")
    path = run(rng, tmp_path, g.build([z]))
    assert any(l["op"].startswith("Resize") for l in layers(path))


def test_resize_nearest_2x_and_linear_downscale_exact_shapes(rng, tmp_path):
    """The common exports: nearest 2x (U-Net, FPN) and a bilinear align_corners downscale."""
    g = B.Graph(rng, 13)
    x = g.input("x", [4, 7, 9])
    a = g.node("Resize", [x, "", g.init(np.array([1, 1, 2, 2], np.float32))], mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    b = g.node("Resize", [a, "", g.init(np.array([1, 1, 0.4, 0.3], np.float32))], mode="linear",
               coordinate_transformation_mode="align_corners")
    run(rng, tmp_path, g.build([b]))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_scales_form_matches_onnxruntime_at_opset9(mode, rng, tmp_path):
    """Upsample(x, scales) as opset-9 exporters write it; convd reads the node in a model declaring opset 11,
    onnxruntime runs the same graph declared at opset 9."""
    import onnxruntime as ort
    from tests.models.runner import TOL
    models = {}
    c, h, w = ri(rng, 1, 5), ri(rng, 1, 9), ri(rng, 1, 9)
    sc = [1.0, 1.0, float(rng.choice([1.0, 2.0, 3.0, 1.5, 2.5])), float(rng.choice([1.0, 2.0, 3.0, 1.5, 2.5]))]
    for opset in (9, 11):
        g = B.Graph(np.random.default_rng(0), opset)
        x = g.input("x", [c, h, w])
        y = g.node("Upsample", [x, g.init(np.array(sc, np.float32), "scales")], mode=mode)
        m = g.build([y], out_shapes={y: ["N", c, int(sc[2] * h), int(sc[3] * w)]})
        models[opset] = tmp_path / f"up{opset}.onnx"
        onnx.save(m, str(models[opset]))
    batch = ri(rng, 1, 3)
    x = rng.uniform(-1, 1, [batch, c, h, w]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    want = ort.InferenceSession(str(models[9]), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    r = convd_run(models[11], ["--input", f"x={tmp_path / 'x.npy'}", "--output", tmp_path / "y.npy"])
    got = np.load(tmp_path / "y.npy")
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= TOL * max(1.0, float(np.abs(want).max())), r.stdout


# ---- ConvTranspose ---------------------------------------------------------------

def convt(g, x, cin, cout, k, stride=1, group=1, dil=1, bias=True, **attrs):
    kh, kw = (k, k) if isinstance(k, int) else k
    w = g.rng.normal(0, np.sqrt(1.0 / (cin * kh * kw)), (cin, cout // group, kh, kw)).astype(np.float32)
    ins = [x, g.init(w)]
    if bias:
        ins.append(g.init(g.rng.uniform(-0.1, 0.1, cout).astype(np.float32), "b"))
    return g.node("ConvTranspose", ins, strides=[stride, stride] if isinstance(stride, int) else list(stride),
                  group=group, dilations=[dil, dil] if isinstance(dil, int) else list(dil), **attrs)


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("form", ["pads", "output_padding", "output_shape", "SAME_UPPER", "SAME_LOWER", "VALID",
                                  "groups", "dilations"])
def test_convtranspose(opset, form, rng, tmp_path):
    g = B.Graph(rng, opset)
    group = ri(rng, 2, 3) if form == "groups" else 1
    cin, cout = group * ri(rng, 1, 4), group * ri(rng, 1, 4)
    h, w = ri(rng, 1, 9), ri(rng, 1, 9)
    x = g.input("x", [cin, h, w])
    k = (ri(rng, 1, 4), ri(rng, 1, 4))
    st = (ri(rng, 1, 3), ri(rng, 1, 3))
    dil = (ri(rng, 1, 3), ri(rng, 1, 3)) if form == "dilations" else (1, 1)
    attrs = {}
    if form in ("pads", "groups", "dilations"):
        full = [(h - 1) * st[0] + (k[0] - 1) * dil[0] + 1, (w - 1) * st[1] + (k[1] - 1) * dil[1] + 1]
        p = [ri(rng, 0, k[0] - 1), ri(rng, 0, k[1] - 1), ri(rng, 0, k[0] - 1), ri(rng, 0, k[1] - 1)]
        for i in range(2):  # leave at least one output row and column
            while p[i] + p[i + 2] > full[i] - 1:
                p[i + (2 if p[i + 2] else 0)] -= 1
        attrs["pads"] = p
    elif form == "output_padding":
        attrs["output_padding"] = [ri(rng, 0, st[0] - 1), ri(rng, 0, st[1] - 1)]
        attrs["pads"] = [ri(rng, 0, k[0] - 1), ri(rng, 0, k[1] - 1), 0, 0]
    elif form == "output_shape":
        full = [(h - 1) * st[0] + k[0], (w - 1) * st[1] + k[1]]
        attrs["output_shape"] = [max(1, full[0] - ri(rng, 0, k[0] - 1)), max(1, full[1] - ri(rng, 0, k[1] - 1))]
    else:
        attrs["auto_pad"] = form
    y = convt(g, x, cin, cout, k, st, group, dil, bias=bool(ri(rng, 0, 1)), kernel_shape=list(k), **attrs)
    if ri(rng, 0, 1):
        y = g.node("Relu", [y])
    run(rng, tmp_path, g.build([y]))


def test_convtranspose_relu_fuses(rng, tmp_path):
    g = B.Graph(rng, 13)
    x = g.input("x", [8, 5, 6])
    y = g.node("Relu", [convt(g, x, 8, 4, 2, stride=2)])
    path = run(rng, tmp_path, g.build([y]))
    labels = [l["op"] for l in layers(path)]
    assert any("ConvTranspose+Relu" in str(l) for l in labels), labels


# ---- refusals ---------------------------------------------------------------------

def fails(path, *needles):
    r = convd_run(path, [], check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


@pytest.mark.parametrize("case", ["cubic", "tf_crop_and_resize", "antialias", "exclude_outside", "aspect",
                                  "channels", "convt_3d", "tf_half_pixel_at_13", "half_pixel_symmetric"])
def test_refusals_name_the_node(case, rng, tmp_path):
    opset = 18 if case in ("antialias", "aspect") else 19 if case == "half_pixel_symmetric" else 13
    g = B.Graph(rng, opset)
    x = g.input("x", [3, 6, 6])
    sc = lambda v: g.init(np.array(v, np.float32), "s")
    out = ["N", 3, 12, 12]
    if case == "cubic":
        y = g.node("Resize", [x, "", sc([1, 1, 2, 2])], mode="cubic", name="the_node")
        want = ["cubic"]
    elif case == "tf_crop_and_resize":
        y = g.node("Resize", [x, sc([0, 0, 0, 0, 1, 1, 1, 1]), sc([1, 1, 2, 2])], mode="linear",
                   coordinate_transformation_mode="tf_crop_and_resize", name="the_node")
        want = ["tf_crop_and_resize"]
    elif case == "antialias":
        y = g.node("Resize", [x, "", sc([1, 1, 0.5, 0.5])], mode="linear", antialias=1, name="the_node")
        want, out = ["antialias"], ["N", 3, 3, 3]
    elif case == "exclude_outside":
        y = g.node("Resize", [x, "", sc([1, 1, 2, 2])], mode="linear", exclude_outside=1, name="the_node")
        want = ["exclude_outside"]
    elif case == "aspect":
        y = g.node("Resize", [x, "", "", g.init(np.array([1, 3, 12, 10], np.int64), "sz")], mode="linear",
                   keep_aspect_ratio_policy="not_larger", name="the_node")
        want = ["keep_aspect_ratio_policy"]
    elif case in ("tf_half_pixel_at_13", "half_pixel_symmetric"):
        mode = "tf_half_pixel_for_nearest" if case == "tf_half_pixel_at_13" else case
        y = g.node("Resize", [x, "", sc([1, 1, 2, 2])], mode="nearest", coordinate_transformation_mode=mode,
                   name="the_node")
        want = [mode]
    elif case == "channels":
        y = g.node("Resize", [x, "", sc([1, 2, 2, 2])], mode="nearest", name="the_node")
        want, out = ["N and C"], ["N", 6, 12, 12]
    else:
        x5 = g.node("Unsqueeze", [x, g.init(np.array([2], np.int64), "ax")])
        w = g.init(np.ones((3, 2, 1, 1, 1), np.float32))
        y = g.node("ConvTranspose", [x5, w], name="the_node")
        want, out = ["2-D"], ["N", 2, 1, 6, 6]
    m = g.build([y], out_shapes={y: out})
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    fails(path, "E_UNSUPPORTED", "the_node", *want)


@pytest.mark.parametrize("group", [1, 2])
def test_stride1_convtranspose_runs_as_a_conv(group, rng, tmp_path):
    """A stride-1 ConvTranspose is the conv with the kernel flipped and the channels swapped: it is lowered so
    (dilations, groups, pads, a Relu fused) and still equals onnxruntime."""
    g = B.Graph(rng, 13)
    x = g.input("x", [4 * group, ri(rng, 3, 9), ri(rng, 3, 9)])
    y = g.node("Relu", [convt(g, x, 4 * group, 2 * group * ri(rng, 1, 3), 3, 1, group, dil=ri(rng, 1, 2),
                              pads=[ri(rng, 0, 2) for _ in range(4)])])
    path = run(rng, tmp_path, g.build([y]))
    assert "ConvTranspose(as Conv)+Relu" in [l["op"] for l in layers(path)]


def test_rounds_on_a_tie_finds_the_f32_ties_only():
    assert rounds_on_a_tie(7, 2, "asymmetric", "round_prefer_ceil")  # 3.5 exactly, 3.4999998 in f32
    assert not rounds_on_a_tie(7, 2, "asymmetric", "floor")  # 3.5 is no boundary for floor
    assert not rounds_on_a_tie(5, 10, "asymmetric", "floor")  # scale 2: every f32 coordinate exact
    assert not rounds_on_a_tie(9, 9, "half_pixel", "round_prefer_floor")
