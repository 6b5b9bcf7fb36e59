"""Convs whose kernel taps read only padding at the planned input size
(runtime/lower-conv-taps.c): DeepLabV3's ASPP (3x3, dilation 24/36, pads =
dilation, on a 14x14 map) runs as a 1x1 conv with the centre weights, and in
general the dead taps are cropped from the kernel. Random geometries against
onnxruntime; the planned layer's parameter count says whether the rewrite
applied, predicted by a brute-force count of the rows each tap reads
(applied only where the cropped kernel needs no negative padding, and not
when every tap is live: dilation 12 on 14x14, or the ordinary convs)."""
import json

import numpy as np
import onnxruntime as ort

from tests.models import builders as B
from tests.models.builders import ri
from tests.models.runner import compare, convd_run
from tests.models.test_ops import layers


def live_taps(size, k, stride, pad_begin, dil, out):
    return [t for t in range(k) if any(0 <= o * stride - pad_begin + t * dil < size for o in range(out))]


def cropped_dim(size, k, stride, pb, pe, dil):
    """The taps the kernel keeps in one dim (k when the crop does not apply)."""
    out = (size + pb + pe - ((k - 1) * dil + 1)) // stride + 1
    live = live_taps(size, k, stride, pb, dil, out)
    if not live:
        return k, False
    r = live[-1] - live[0] + 1
    d = 1 if r == 1 else dil
    pb2 = pb - live[0] * dil
    pe2 = (out - 1) * stride + (r - 1) * d + 1 - size - pb2
    return (r, True) if pb2 >= 0 and pe2 >= 0 else (k, False)


def expected_params(cin, cout, group, geo, h, w):
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = geo
    r, ok_h = cropped_dim(h, kh, sh, pt, pb, dh)
    s, ok_w = cropped_dim(w, kw, sw, pl, pr, dw)
    if not (ok_h and ok_w):
        r, s = kh, kw
    return cout * (cin // group) * r * s + cout


def add_conv(g, x, cin, cout, group, geo):
    (kh, kw), stride, pads, dil = geo
    y = g.conv(x, cin, cout, (kh, kw), stride=stride, pad=list(pads), group=group, dilation=dil)
    return y, g.nodes[-1].name


def check_params(path, convs):
    info = {l["name"]: l for l in layers(path)}
    for name, want in convs:
        assert info[name]["params"] == want, (name, info[name], want)


def test_aspp_dilated_convs_become_1x1(rng, tmp_path):
    """3x3 at dilation >= H and W with pads = dilation: one 1x1 conv; dilation below the size keeps 3x3."""
    h, w = ri(rng, 2, 14), ri(rng, 2, 14)
    cin, cout = ri(rng, 1, 40), ri(rng, 1, 40)
    g = B.Graph(rng, 13)
    x = g.input("x", [cin, h, w])
    outs, convs = [], []
    big = max(h, w)
    for d in (big, ri(rng, big, 3 * big), 36):
        geo = ((3, 3), (1, 1), (d, d, d, d), (d, d))
        y, name = add_conv(g, x, cin, cout, 1, geo)
        outs.append(g.relu(y))
        convs.append((name, cout * cin + cout))
    if min(h, w) >= 2:  # rate 12 on 14x14: the off-centre taps reach the border rows, so the kernel stays 3x3
        d = ri(rng, 1, min(h, w) - 1)
        y, name = add_conv(g, x, cin, cout, 1, ((3, 3), (1, 1), (d, d, d, d), (d, d)))
        outs.append(y)
        convs.append((name, 9 * cout * cin + cout))
    path = B.save(g.build(outs), tmp_path / "aspp.onnx")
    compare(path, tmp_path, 1, rng)
    compare(path, tmp_path, ri(rng, 2, 3), rng)
    check_params(path, convs)


def random_geometry(rng, h, w):
    while True:
        k = (ri(rng, 1, 5), ri(rng, 1, 5))
        dil = (ri(rng, 1, 16), ri(rng, 1, 16))
        stride = (ri(rng, 1, 3), ri(rng, 1, 3))
        span = [(k[i] - 1) * dil[i] for i in range(2)]
        pads = (ri(rng, 0, span[0]), ri(rng, 0, span[1]), ri(rng, 0, span[0]), ri(rng, 0, span[1]))
        if h + pads[0] + pads[2] > span[0] and w + pads[1] + pads[3] > span[1]:
            return k, stride, pads, dil


def test_dead_taps_random_geometry(rng, tmp_path):
    """Any kernel, stride, dilation and asymmetric padding; groups; a BN and Relu after some."""
    h, w = ri(rng, 1, 12), ri(rng, 1, 12)
    group = ri(rng, 1, 3)
    cin, cout = group * ri(rng, 1, 6), group * ri(rng, 1, 6)
    g = B.Graph(rng, 13)
    x = g.input("x", [cin, h, w])
    outs, convs = [], []
    for i in range(8):
        geo = random_geometry(rng, h, w)
        y, name = add_conv(g, x, cin, cout, group, geo)
        if i % 2:
            y = g.relu(g.bn(y, cout))
        outs.append(y)
        convs.append((name, expected_params(cin, cout, group, geo, h, w)))
    path = B.save(g.build(outs), tmp_path / "taps.onnx")
    compare(path, tmp_path, 1, rng)
    compare(path, tmp_path, ri(rng, 2, 3), rng)
    check_params(path, convs)


def test_dead_taps_per_input_size(rng, tmp_path):
    """Symbolic H and W: the crop is decided per planned size (1x1 at 10x10, 3x3 at 40x40)."""
    cin, cout, d = ri(rng, 1, 16), ri(rng, 1, 16), 24
    g = B.Graph(rng, 13)
    x = g.input("x", [cin, "H", "W"])
    y = g.conv(x, cin, cout, 3, pad=d, dilation=d)
    path = B.save(g.build([y]), tmp_path / "dyn.onnx")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for size, taps in ((10, 1), (40, 9)):
        feed = rng.uniform(-1, 1, (1, cin, size, size)).astype(np.float32)
        np.save(tmp_path / "x.npy", feed)
        r = convd_run(path, ["--input", f"x={tmp_path / 'x.npy'}", "--output", tmp_path / "y.npy", "--info",
                             "--json"])
        want = sess.run(None, {"x": feed})[0]
        got = np.load(tmp_path / "y.npy")
        assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())
        conv = [l for l in json.loads(r.stdout)["layers"] if l["op"].startswith("Conv")]
        assert conv[0]["params"] == taps * cout * cin + cout, conv
