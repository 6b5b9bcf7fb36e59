"""The Python client's shared-memory regions (convd.Region): inputs that are
numpy views of a registered region are named, not sent; outputs in `into` are
computed straight into their views."""
import numpy as np
import pytest

import convd
from tests.integration.test_daemon_models import assert_close, conv_model, reference
from tests.support.daemon import TestDaemon

C, H, W, COUT = 3, 6, 5, 4


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    conv_model(d / "conv.onnx", C, COUT, H, W, seed=1)
    return d


@pytest.fixture(scope="module")
def d(models_dir):
    with TestDaemon(models_dir=models_dir, args=["--max-batch", "4"]) as daemon:
        yield daemon


@pytest.fixture
def c(d):
    with convd.Client(d.socket) as client:
        yield client


def test_views_in_and_out(models_dir, c):
    with convd.Region(1 << 16) as r:
        assert c.register_region(r, "r") == {"name": "r", "size": 1 << 16, "writable": True}
        x = r.array((2, C, H, W), "f32")
        y = r.array((2, COUT, H, W), "f32", offset=8192)
        x[:] = np.random.default_rng(1).standard_normal(x.shape)
        out = c.infer("conv", {"x": x}, into={"y": y})
        assert np.shares_memory(out["y"], y)
        assert_close(y, reference(str(models_dir / "conv.onnx"), np.array(x))["y"])
        assert c.regions() == [{"name": "r", "size": 1 << 16, "writable": True, "in_use": 0}]
        # A plain array still goes inline; an inline answer still decodes.
        out2 = c.infer("conv", {"x": np.array(x)})
        assert_close(out2["y"], np.array(y))
        c.unregister_region("r")
        assert c.regions() == []
        del x, y, out


def test_into_a_view_of_no_region_is_e_params(c):
    with pytest.raises(convd.ConvdError) as e:
        c.infer("conv", {"x": np.zeros((1, C, H, W), np.float32)},
                into={"y": np.zeros((1, COUT, H, W), np.float32)})
    assert e.value.code == "E_PARAMS"


def test_region_errors_keep_the_connection(c):
    with convd.Region(64) as r:
        c.register_region(r, "tiny")
        with pytest.raises(convd.ConvdError) as e:
            c.infer("conv", {"x": np.zeros((1, C, H, W), np.float32)}, into={"y": r.array((4,), "f32")})
        assert e.value.code == "E_REGION"
        with pytest.raises(convd.ConvdError) as e:
            c.register_region(r, "tiny")
        assert e.value.code == "E_EXISTS"
    assert c.health()["status"] == "ok"
