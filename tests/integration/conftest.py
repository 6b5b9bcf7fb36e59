"""Fixtures of the client and tool tests (test_client_c, test_client_python,
test_client_aio, test_convctl, test_convbench)."""
import pytest

from tests.integration import client_models
from tests.support.daemon import TestDaemon


@pytest.fixture(scope="module")
def scale2_daemon(tmp_path_factory):
    """One daemon per module with client_models' scale2.onnx in its models
    folder, checked loaded (a daemon that did not load it fails the tests,
    never skips them)."""
    models = tmp_path_factory.mktemp("models")
    client_models.write_scale2(models / "scale2.onnx")
    with TestDaemon(models_dir=models) as d:
        client_models.assert_loaded(d)
        yield d
