import sys
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client" / "python"))

from tests.support.daemon import TestDaemon  # noqa: E402


@pytest.fixture
def daemon(tmp_path):
    """A running convd on a temporary socket, stopped (SIGTERM) afterwards."""
    with TestDaemon(tmp_path) as d:
        yield d
