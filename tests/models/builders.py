"""Builders of small (and not so small) CNN models as ONNX files, with random
weights, for the model tests and the benchmarks.

    g = Graph(rng, opset=13)
    x = g.input("x", [3, 32, 32])           # batch dim is symbolic ("N")
    y = resnet_basic(g, g.conv_bn_relu(x, 3, 16, 3), 16, 16, stride=1)
    model = g.build([y])                      # onnx.ModelProto

Every block helper takes the graph, the input tensor name and channel counts,
and returns the output tensor name. Whole models: resnet50(), mobilenetv2().
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """Accumulates nodes and initializers; names are generated."""

    def __init__(self, rng, opset=13, ir_version=8):
        self.rng = rng
        self.opset = opset
        self.ir_version = ir_version
        self.nodes = []
        self.inits = []
        self.inputs = []
        self.n = 0

    def name(self, prefix):
        self.n += 1
        return f"{prefix}_{self.n}"

    def input(self, name, shape, batch="N"):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch] + list(shape)))
        return name

    def init(self, arr, prefix="w"):
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, inputs, n_out=1, name=None, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name or self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    # ---- layers --------------------------------------------------------------

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, dilation=1, bias=True, auto_pad=None):
        kh, kw = (k, k) if isinstance(k, int) else k
        dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
        fan_in = cin // group * kh * kw
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // group, kh, kw)).astype(np.float32)
        ins = [x, self.init(w)]
        if bias:
            ins.append(self.init(self.rng.uniform(-0.1, 0.1, cout).astype(np.float32), "b"))
        attrs = dict(kernel_shape=[kh, kw], strides=[stride, stride] if isinstance(stride, int) else list(stride),
                     group=group, dilations=[dh, dw])
        if auto_pad:
            attrs["auto_pad"] = auto_pad
        else:
            if pad is None:
                pad = [dh * (kh - 1) // 2, dw * (kw - 1) // 2] * 2
            elif isinstance(pad, int):
                pad = [pad] * 4
            attrs["pads"] = list(pad)
        return self.node("Conv", ins, **attrs)

    def bn(self, x, c, gamma=(0.5, 1.5)):
        """BatchNormalization with random statistics; gamma is the scale's range (residual branches end in a
        small one, as trained networks and PyTorch's zero_init_residual keep them, so deep random models do not
        blow activations up to magnitudes where float32 summation order dominates the comparison)."""
        r = self.rng
        ins = [x] + [self.init(a.astype(np.float32), "bn") for a in (
            r.uniform(*gamma, c), r.uniform(-0.1, 0.1, c), r.uniform(-0.1, 0.1, c), r.uniform(0.5, 1.5, c))]
        return self.node("BatchNormalization", ins, epsilon=1e-5)

    def relu(self, x):
        return self.node("Relu", [x])

    def relu6(self, x):
        lo = self.init(np.array(0.0, np.float32), "lo")
        hi = self.init(np.array(6.0, np.float32), "hi")
        return self.node("Clip", [x, lo, hi])

    def act(self, x, kind):
        if kind == "relu":
            return self.relu(x)
        if kind == "relu6":
            return self.relu6(x)
        if kind == "hardswish":
            return self.node("HardSwish", [x])
        if kind == "sigmoid":
            return self.node("Sigmoid", [x])
        if kind == "hardsigmoid":
            return self.node("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)
        if kind == "leakyrelu":
            return self.node("LeakyRelu", [x], alpha=0.1)
        if kind is None:
            return x
        raise ValueError(kind)

    def conv_bn_act(self, x, cin, cout, k, stride=1, act="relu", group=1, **kw):
        return self.act(self.bn(self.conv(x, cin, cout, k, stride, group=group, bias=False, **kw), cout), act)

    def conv_bn_relu(self, x, cin, cout, k, stride=1, **kw):
        return self.conv_bn_act(x, cin, cout, k, stride, "relu", **kw)

    def gemm(self, x, k, n, trans_b=True, alpha=1.0, beta=1.0, bias=True):
        w = self.rng.normal(0, np.sqrt(1.0 / k), (n, k) if trans_b else (k, n)).astype(np.float32)
        ins = [x, self.init(w)]
        if bias:
            ins.append(self.init(self.rng.uniform(-0.1, 0.1, n).astype(np.float32), "b"))
        return self.node("Gemm", ins, transB=int(trans_b), alpha=alpha, beta=beta)

    def build(self, outputs, name="convd-test", out_shapes=None):
        """out_shapes: {output: shape} used where ONNX shape inference cannot
        tell (outputs behind a Reshape whose shape is computed)."""
        graph = helper.make_graph(self.nodes, name, self.inputs,
                                  [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                                  self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                              producer_name="convd-tests")
        m.ir_version = self.ir_version
        # Give the outputs their inferred types and shapes (the checker wants them).
        inferred = onnx.shape_inference.infer_shapes(m)
        known = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for out in m.graph.output:
            if out.name in known and known[out.name].type.tensor_type.HasField("shape"):
                out.type.CopyFrom(known[out.name].type)
            elif out_shapes and out.name in out_shapes:
                out.type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, out_shapes[out.name]))
        return m


# ---- blocks -------------------------------------------------------------------

RESIDUAL_GAMMA = (0.1, 0.4)  # scale range of the BN that ends a residual branch

def resnet_basic(g, x, cin, cout, stride=1):
    """ResNet basic block: 3x3-BN-ReLU, 3x3-BN, + shortcut, ReLU."""
    y = g.conv_bn_relu(x, cin, cout, 3, stride)
    y = g.bn(g.conv(y, cout, cout, 3, bias=False), cout, gamma=RESIDUAL_GAMMA)
    sc = x if stride == 1 and cin == cout else g.bn(g.conv(x, cin, cout, 1, stride, bias=False), cout)
    return g.relu(g.node("Add", [y, sc]))


def resnet_bottleneck(g, x, cin, mid, cout, stride=1):
    """ResNet bottleneck: 1x1 reduce, 3x3 (stride), 1x1 expand, + shortcut, ReLU."""
    y = g.conv_bn_relu(x, cin, mid, 1)
    y = g.conv_bn_relu(y, mid, mid, 3, stride)
    y = g.bn(g.conv(y, mid, cout, 1, bias=False), cout, gamma=RESIDUAL_GAMMA)
    sc = x if stride == 1 and cin == cout else g.bn(g.conv(x, cin, cout, 1, stride, bias=False), cout)
    return g.relu(g.node("Add", [sc, y]))


def mbv2_inverted(g, x, cin, cout, expand=6, stride=1, act="relu6"):
    """MobileNetV2 inverted residual: 1x1 expand, depthwise 3x3, 1x1 project."""
    mid = cin * expand
    y = g.conv_bn_act(x, cin, mid, 1, act=act) if expand != 1 else x
    y = g.conv_bn_act(y, mid, mid, 3, stride, act=act, group=mid)
    residual = stride == 1 and cin == cout
    y = g.bn(g.conv(y, mid, cout, 1, bias=False), cout, gamma=RESIDUAL_GAMMA if residual else (0.5, 1.5))
    if residual:
        y = g.node("Add", [x, y])
    return y


def squeeze_fire(g, x, cin, s, e1, e3):
    """SqueezeNet fire module: squeeze 1x1, then 1x1 and 3x3 expands concatenated."""
    sq = g.relu(g.conv(x, cin, s, 1))
    a = g.relu(g.conv(sq, s, e1, 1))
    b = g.relu(g.conv(sq, s, e3, 3))
    return g.node("Concat", [a, b], axis=1)


def channel_shuffle(g, x, c, h, w, groups, dynamic=False):
    """ShuffleNet channel shuffle: Reshape [N,g,c/g,h,w], Transpose(0,2,1,3,4), Reshape back.
    dynamic=True computes the shapes as PyTorch exports them with a dynamic batch:
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    if dynamic:
        shp = g.node("Shape", [x])
        idx = g.init(np.array(0, np.int64), "i")
        n = g.node("Gather", [shp, idx], axis=0)
        n = g.node("Cast", [n], to=TensorProto.INT64)
        ax = g.init(np.array([0], np.int64), "axes")
        n1 = g.node("Unsqueeze", [n, ax]) if g.opset >= 13 else g.node("Unsqueeze", [n], axes=[0])
        rest = g.init(np.array([groups, c // groups, h, w], np.int64), "s")
        s1 = g.node("Concat", [n1, rest], axis=0)
        rest2 = g.init(np.array([c, h, w], np.int64), "s")
        s2 = g.node("Concat", [n1, rest2], axis=0)
    else:
        s1 = g.init(np.array([-1, groups, c // groups, h, w], np.int64), "s")
        s2 = g.init(np.array([0, c, h, w], np.int64), "s")
    y = g.node("Reshape", [x, s1])
    y = g.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
    return g.node("Reshape", [y, s2])


def se_block(g, x, c, r=4, gate="sigmoid"):
    """Squeeze-excitation: GlobalAveragePool, FC (1x1 conv) ReLU, FC, gate, Mul broadcast."""
    s = g.node("GlobalAveragePool", [x])
    s = g.relu(g.conv(s, c, max(1, c // r), 1))
    s = g.act(g.conv(s, max(1, c // r), c, 1), gate)
    return g.node("Mul", [x, s])


def fc_head(g, x, c, classes, softmax=True):
    """GlobalAveragePool, Flatten, Gemm (transB), Softmax."""
    y = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    y = g.gemm(y, c, classes)
    return g.node("Softmax", [y], axis=1) if softmax else y


# ---- the families of issue 22: DenseNet, ShuffleNetV2, ConvNeXt, MnasNet, Inception pieces ----

def ints(g, values):
    return g.init(np.array(values, np.int64), "i")


def densenet_block(g, x, cin, growth, layers, bn_size=4):
    """DenseNet dense block: each layer BN-ReLU-1x1-BN-ReLU-3x3 on the concat of everything before it."""
    feats, c = [x], cin
    for _ in range(layers):
        y = g.node("Concat", feats, axis=1) if len(feats) > 1 else feats[0]
        y = g.conv(g.relu(g.bn(y, c)), c, bn_size * growth, 1, bias=False)
        y = g.conv(g.relu(g.bn(y, bn_size * growth)), bn_size * growth, growth, 3, bias=False)
        feats.append(y)
        c += growth
    return g.node("Concat", feats, axis=1), c


def densenet_transition(g, x, cin, cout):
    """DenseNet transition: BN-ReLU-1x1, AveragePool 2x2 stride 2."""
    y = g.conv(g.relu(g.bn(x, cin)), cin, cout, 1, bias=False)
    return g.node("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])


def padded_avgpool(g, x):
    """avg_pool2d(3, stride 1, padding 1) as torch exports count_include_pad=True: Pad, then AveragePool."""
    p = g.node("Pad", [x, ints(g, [0, 0, 1, 1, 0, 0, 1, 1])], mode="constant")
    return g.node("AveragePool", [p], kernel_shape=[3, 3], strides=[1, 1])


def shufflenet_v2_unit(g, x, c, form="split"):
    """ShuffleNetV2 unit, stride 1: x.chunk(2, 1) as a Split (or two Slices), 1x1-BN-ReLU, dw 3x3-BN,
    1x1-BN-ReLU on the second half, Concat with the first, channel shuffle of 2 groups."""
    h = c // 2
    if form == "split":
        sp = [x, ints(g, [h, h])] if g.opset >= 13 else [x]
        a, b = g.node("Split", sp, n_out=2, axis=1, **({} if g.opset >= 13 else {"split": [h, h]}))
    else:
        a = g.node("Slice", [x, ints(g, [0]), ints(g, [h]), ints(g, [1])])
        b = g.node("Slice", [x, ints(g, [h]), ints(g, [2 ** 63 - 1]), ints(g, [1])])
    y = g.conv_bn_relu(b, h, h, 1)
    y = g.conv_bn_act(y, h, h, 3, group=h, act=None)
    y = g.conv_bn_relu(y, h, h, 1)
    return g.node("Concat", [a, y], axis=1)


def layernorm_last(g, x, c, eps=1e-6):
    """LayerNorm over the last axis with affine parameters: the op from opset 17, before that the pattern
    torch's exporter writes (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add)."""
    gamma = g.init(g.rng.uniform(0.5, 1.5, c).astype(np.float32), "gamma")
    beta = g.init(g.rng.uniform(-0.2, 0.2, c).astype(np.float32), "beta")
    if g.opset >= 17:
        return g.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)
    m = g.node("ReduceMean", [x], axes=[-1], keepdims=1)
    d = g.node("Sub", [x, m])
    v = g.node("ReduceMean", [g.node("Pow", [d, g.init(np.array(2.0, np.float32), "two")])], axes=[-1], keepdims=1)
    y = g.node("Div", [d, g.node("Sqrt", [g.node("Add", [v, g.init(np.array(eps, np.float32), "eps")])])])
    return g.node("Add", [g.node("Mul", [y, gamma]), beta])


def gelu(g, x):
    """GELU: the op from opset 20, before that the Erf form torch exports."""
    if g.opset >= 20:
        return g.node("Gelu", [x])
    t = g.node("Div", [x, g.init(np.array(1.4142135623730951, np.float32), "sqrt2")])
    a = g.node("Add", [g.node("Erf", [t]), g.init(np.array(1.0, np.float32), "one")])
    return g.node("Mul", [g.node("Mul", [x, a]), g.init(np.array(0.5, np.float32), "half")])


def linear(g, x, k, n):
    """nn.Linear on the last axis as torch exports it on a rank > 2 input: MatMul, then Add of the bias."""
    w = g.init(g.rng.normal(0, np.sqrt(1.0 / k), (k, n)).astype(np.float32))
    return g.node("Add", [g.node("MatMul", [x, w]), g.init(g.rng.uniform(-0.1, 0.1, n).astype(np.float32), "b")])


def layernorm2d(g, x, c):
    """torchvision's LayerNorm2d: NCHW -> NHWC, LayerNorm over C, back to NCHW."""
    y = g.node("Transpose", [x], perm=[0, 2, 3, 1])
    return g.node("Transpose", [layernorm_last(g, y, c)], perm=[0, 3, 1, 2])


def convnext_block(g, x, c):
    """ConvNeXt block: depthwise 7x7, Permute to NHWC, LayerNorm, Linear 4c, GELU, Linear c, layer scale,
    Permute back, + x."""
    y = g.conv(x, c, c, 7, group=c)
    y = g.node("Transpose", [y], perm=[0, 2, 3, 1])
    y = layernorm_last(g, y, c)
    y = linear(g, gelu(g, linear(g, y, c, 4 * c)), 4 * c, c)
    y = g.node("Mul", [y, g.init(g.rng.uniform(0.1, 0.5, c).astype(np.float32), "scale")])
    y = g.node("Transpose", [y], perm=[0, 3, 1, 2])
    return g.node("Add", [x, y])


def mnasnet_head(g, x, cin, c, classes):
    """MnasNet's head: 1x1-BN-ReLU, x.mean([2, 3]) (a ReduceMean over H and W, no keepdims), Dropout, Gemm."""
    y = g.conv_bn_relu(x, cin, c, 1)
    y = g.node("ReduceMean", [y, ints(g, [2, 3])] if g.opset >= 18 else [y], keepdims=0,
               **({} if g.opset >= 18 else {"axes": [2, 3]}))
    return g.gemm(g.node("Dropout", [y]), c, classes)


# ---- whole models (bench) ---------------------------------------------------------

def resnet50(rng, classes=1000, size=224, width=1.0, opset=13):
    """ResNet-50-shaped model (BN unfused in the file, as PyTorch exports it)."""
    g = Graph(rng, opset)
    w = lambda c: max(8, int(c * width))
    x = g.input("input", [3, size, size])
    y = g.conv_bn_relu(x, 3, w(64), 7, 2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = w(64)
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            y = resnet_bottleneck(g, y, cin, w(mid), w(mid * 4), stride if i == 0 else 1)
            cin = w(mid * 4)
    y = fc_head(g, y, cin, classes, softmax=False)
    return g.build([y], "resnet50")


def resnet18(rng, classes=1000, size=224, width=1.0, opset=13):
    """ResNet-18-shaped model: basic blocks (2, 2, 2, 2) at 64..512 channels."""
    g = Graph(rng, opset)
    w = lambda c: max(8, int(c * width))
    x = g.input("input", [3, size, size])
    y = g.conv_bn_relu(x, 3, w(64), 7, 2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = w(64)
    for c, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for i in range(2):
            y = resnet_basic(g, y, cin, w(c), stride if i == 0 else 1)
            cin = w(c)
    y = fc_head(g, y, cin, classes, softmax=False)
    return g.build([y], "resnet18")


def mobilenetv2(rng, classes=1000, size=224, width=1.0, opset=13):
    """MobileNetV2-shaped model."""
    g = Graph(rng, opset)
    w = lambda c: max(8, int(round(c * width / 8)) * 8)
    x = g.input("input", [3, size, size])
    y = g.conv_bn_act(x, 3, w(32), 3, 2, act="relu6")
    cin = w(32)
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            y = mbv2_inverted(g, y, cin, w(c), t, s if i == 0 else 1)
            cin = w(c)
    y = g.conv_bn_act(y, cin, 1280, 1, act="relu6")
    y = fc_head(g, y, 1280, classes, softmax=False)
    return g.build([y], "mobilenetv2")


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def dynamic_hw_segnet(rng, cin=3, classes=5, opset=13):
    """A segmentation-shaped model whose input has symbolic H and W (as torchvision's segmentation exports
    have, through dynamic_axes): a strided stem, a pool, a residual block, a squeeze-excite gate, a 1x1
    classifier per pixel, and a second output reshaped to [N, classes, H*W] with H*W computed from
    Shape(seg) (it folds from the input size of each plan)."""
    g = Graph(rng, opset=opset)
    x = g.input("input", [cin, "H", "W"])
    y = g.conv_bn_relu(x, cin, 16, 3, stride=2)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = resnet_basic(g, y, 16, 16)
    y = se_block(g, y, 16)  # a global pool whose result scales every pixel
    seg = g.conv(y, 16, classes, 1)
    shape = g.node("Shape", [seg])
    nc = g.node("Gather", [shape, ints(g, [0, 1])], axis=0)
    hw = g.node("Mul", [g.node("Gather", [shape, ints(g, [2])], axis=0), g.node("Gather", [shape, ints(g, [3])], axis=0)])
    flat = g.node("Reshape", [seg, g.node("Concat", [nc, hw], axis=0)])
    return g.build([seg, flat], out_shapes={flat: ["N", classes, "HW"]})


# ---- segmentation heads (issue 22): Resize and ConvTranspose --------------------------

def resize_to(g, y, like, mode="linear", form="slice"):
    """F.interpolate(y, size=like.shape[-2:], mode=..., align_corners=False) as torch.onnx exports it at
    opset 11+: sizes = Concat(Shape(y)[0:2], like's H and W from its Shape), empty roi and scales.
    form "slice": Slice(Shape(like), 2, 4); "gather": Gather 2 and 3, Unsqueeze, Concat (a traced
    x.shape[-2:] read element by element)."""
    i64 = lambda v: g.init(np.array(v, np.int64), "i")
    sy = g.node("Shape", [y])
    nc = g.node("Slice", [sy, i64([0]), i64([2]), i64([0])])
    sl = g.node("Shape", [like])
    if form == "slice":
        hw = g.node("Slice", [sl, i64([2]), i64([4]), i64([0])])
    else:
        dims = []
        for a in (2, 3):
            d = g.node("Gather", [sl, i64(a)], axis=0)
            dims.append(g.node("Unsqueeze", [d, i64([0])]) if g.opset >= 13 else g.node("Unsqueeze", [d], axes=[0]))
        hw = g.node("Cast", [g.node("Concat", dims, axis=0)], to=TensorProto.INT64)
    sizes = g.node("Concat", [nc, hw], axis=0)
    roi = g.init(np.zeros(0, np.float32), "roi")
    scales = g.init(np.zeros(0, np.float32), "scales")
    attrs = dict(mode=mode, nearest_mode="floor")
    attrs["coordinate_transformation_mode"] = "pytorch_half_pixel" if mode == "linear" else "asymmetric"
    if g.opset < 18:
        attrs["cubic_coeff_a"] = -0.75
    return g.node("Resize", [y, roi, scales, sizes], **attrs)


def fcn_head(rng, size=32, classes=5, width=8, opset=13, form="slice", dynamic=False):
    """FCN-like: a stride-8 conv backbone, the FCNHead (3x3-BN-ReLU, 1x1 classifier), then bilinear
    Resize back to the input size through Shape/Slice/Concat, as torchvision's fcn exports it.
    dynamic: H and W symbolic (torch.onnx.export's dynamic_axes), planned per input size."""
    g = Graph(rng, opset)
    x = g.input("input", [3, "H", "W"] if dynamic else [3, size, size + 3])
    y = g.conv_bn_relu(x, 3, width, 3, 2)
    y = resnet_basic(g, y, width, 2 * width, 2)
    y = resnet_basic(g, y, 2 * width, 4 * width, 2)
    y = g.conv_bn_relu(y, 4 * width, width, 3)
    y = g.conv(y, width, classes, 1)
    out = resize_to(g, y, x, "linear", form)
    return g.build([out], out_shapes={out: ["N", classes, "H", "W"] if dynamic else ["N", classes, size, size + 3]})


def lraspp_head(rng, size=32, classes=4, width=8, opset=13):
    """LRASPP-like: low (stride 4) and high (stride 8) features; the high branch's 1x1-BN-ReLU gated by a
    sigmoid of its global average, Resize to the low features' size, both classified and added, then
    Resize to the input size."""
    g = Graph(rng, opset)
    x = g.input("input", [3, size, size + 1])
    low = g.conv_bn_act(x, 3, width, 3, 2, act="relu6")
    low = mbv2_inverted(g, low, width, width, 4, 2, act="relu")
    high = mbv2_inverted(g, low, width, 2 * width, 4, 2, act="relu6")
    cbr = g.conv_bn_relu(high, 2 * width, 2 * width, 1)
    s = g.node("GlobalAveragePool", [high])
    s = g.node("Sigmoid", [g.conv(s, 2 * width, 2 * width, 1, bias=False)])
    y = g.node("Mul", [cbr, s])
    y = resize_to(g, y, low, "linear")
    y = g.node("Add", [g.conv(low, width, classes, 1), g.conv(y, 2 * width, classes, 1)])
    out = resize_to(g, y, x, "linear")
    return g.build([out], out_shapes={out: ["N", classes, size, size + 1]})


def conv_transpose(g, x, cin, cout, k=2, stride=2, bias=True, **attrs):
    w = g.rng.normal(0, np.sqrt(1.0 / (cin * k * k)), (cin, cout, k, k)).astype(np.float32)
    ins = [x, g.init(w)]
    if bias:
        ins.append(g.init(g.rng.uniform(-0.1, 0.1, cout).astype(np.float32), "b"))
    return g.node("ConvTranspose", ins, kernel_shape=[k, k], strides=[stride, stride], **attrs)


def unet_decoder(rng, size=32, classes=3, width=8, opset=13):
    """U-Net-like: two encoder stages (double conv, MaxPool), a bottleneck, two decoder stages of
    ConvTranspose 2x2 stride 2, Concat with the skip and a double conv; one stage upsamples with a
    nearest Resize (scales 2) and a conv instead, as some U-Nets do; a 1x1 classifier."""
    g = Graph(rng, opset)
    x = g.input("input", [3, size, size])
    dbl = lambda t, ci, co: g.conv_bn_relu(g.conv_bn_relu(t, ci, co, 3), co, co, 3)
    pool = lambda t: g.node("MaxPool", [t], kernel_shape=[2, 2], strides=[2, 2])
    e1 = dbl(x, 3, width)
    e2 = dbl(pool(e1), width, 2 * width)
    b = dbl(pool(e2), 2 * width, 4 * width)
    u2 = g.relu(conv_transpose(g, b, 4 * width, 2 * width))
    d2 = dbl(g.node("Concat", [u2, e2], axis=1), 4 * width, 2 * width)
    up = g.node("Resize", [d2, g.init(np.zeros(0, np.float32), "roi"), g.init(np.array([1, 1, 2, 2], np.float32), "sc")],
                mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    u1 = g.conv(up, 2 * width, width, 3)
    d1 = dbl(g.node("Concat", [u1, e1], axis=1), 2 * width, width)
    t = conv_transpose(g, d1, width, width, k=3, stride=1, pads=[1, 1, 1, 1])
    return g.build([g.conv(g.relu(t), width, classes, 1)])
