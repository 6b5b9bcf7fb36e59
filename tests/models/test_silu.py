"""SiLU as torch exports it (EfficientNet, RegNet-free): y = Mul(x, Sigmoid(x)),
either operand order, fused into one activation (runtime/fuse-patterns.c), and
into the epilogue of x's producer when the pattern alone reads x (a conv:
"Conv+SiLU"); a SiLU of a graph input or of a pool's output stays an
activation of its own; not fused when the Sigmoid is read elsewhere too or
sigmoids another tensor. Random shapes against onnxruntime."""
from tests.models import builders as B
from tests.models.builders import ri
from tests.models.test_ops import layers, run


def test_silu_fused_and_not(rng, tmp_path):
    c, h, w = ri(rng, 1, 40), ri(rng, 1, 20), ri(rng, 1, 20)
    g = B.Graph(rng, 13)
    x = g.input("x", [c, h, w])
    y = g.conv(x, c, c, 3)
    a = g.node("Mul", [y, g.node("Sigmoid", [y])])  # fused
    b = g.conv(a, c, c, 1)
    b = g.node("Mul", [g.node("Sigmoid", [b]), b])  # fused, the other order
    s = g.node("Sigmoid", [b])
    kept = g.node("Mul", [b, s])  # not fused: the Sigmoid is also an output's input
    other = g.node("Add", [s, s])
    z = g.node("Mul", [kept, g.node("Sigmoid", [x])])  # not fused: sigmoid of another tensor
    p = g.node("MaxPool", [x], kernel_shape=[1, 1])
    on_pool = g.node("Mul", [p, g.node("Sigmoid", [p])])  # fused, but a pool has no epilogue
    on_input = g.node("Mul", [x, g.node("Sigmoid", [x])])  # fused, x has no producer
    path = run(rng, tmp_path, g.build([z, other, on_pool, on_input]))
    ops = [l["op"] for l in layers(path)]
    assert sum(o.endswith("+SiLU") and o.startswith("Conv") for o in ops) == 2, ops
    assert sum(o.startswith("SiLU") for o in ops) == 2, ops
    assert sum(o.startswith("Sigmoid") for o in ops) == 2, ops


def test_hardswish_pattern_fused(rng, tmp_path):
    """torch's hardswish below opset 14 (MobileNetV3): x * HardSigmoid(x, 1/6,
    1/2), into the conv before it; a HardSigmoid with other parameters is a
    gate like any other and stays."""
    c, h, w = ri(rng, 1, 40), ri(rng, 1, 20), ri(rng, 1, 20)
    g = B.Graph(rng, 13)
    x = g.input("x", [c, h, w])
    y = g.conv(x, c, c, 3)
    y = g.node("Mul", [g.node("HardSigmoid", [y], alpha=1.0 / 6, beta=0.5), y])  # fused into the conv
    y = g.conv(y, c, c, 1)
    z = g.node("Mul", [y, g.node("HardSigmoid", [y], alpha=0.2, beta=0.5)])  # not HardSwish
    p = g.node("MaxPool", [z], kernel_shape=[1, 1])
    q = g.node("Mul", [p, g.node("HardSigmoid", [p], alpha=1.0 / 6, beta=0.5)])  # HardSwish of its own
    path = run(rng, tmp_path, g.build([q]))
    ops = [l["op"] for l in layers(path)]
    assert sum(o.startswith("Conv") and o.endswith("+HardSwish") for o in ops) == 1, ops
    assert sum(o.startswith("HardSwish") for o in ops) == 1, ops
    assert sum(o.startswith("HardSigmoid") for o in ops) == 1, ops
