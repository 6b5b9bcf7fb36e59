import os
import pathlib
import random
import shutil
import sys
import tempfile

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client" / "python"))

from tests.support.daemon import TestDaemon  # noqa: E402

# The run's own cache folder for everything convd caches (the planner's
# calibration, the int8 and tuning timings): a test run loads the machine
# with its own daemons and clients, and timings taken then, left in the
# user's ~/.cache/convd, would steer every later convd's plans (measured:
# a 2-thread calibration taken during the suite made the 90%-pruned
# ResNet-50 pick dense kernels, 12.3 ms against 6.6). Tests that need a
# cache of their own still set XDG_CACHE_HOME themselves.
_CACHE_HOME = tempfile.mkdtemp(prefix="convd-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE_HOME, ignore_errors=True)


@pytest.fixture
def daemon(tmp_path):
    """A running convd on a temporary socket, stopped (SIGTERM) afterwards."""
    with TestDaemon(tmp_path) as d:
        yield d


@pytest.fixture
def rng():
    """Fresh random draws per run; CD_TEST_SEED=N repeats one (the seed is printed)."""
    seed = int(os.environ.get("CD_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def slow():
    """The slow model sized for this machine (tests/support/slow_model.py),
    measured once per session."""
    from tests.support import slow_model
    return slow_model.get()


def pytest_terminal_summary(terminalreporter):
    from tests.support import slow_model
    for line in slow_model.reports:
        terminalreporter.write_line(line)
    # One line per skipped test, named, with its reason (-rs groups equal
    # reasons under the place that called skip); tests/run collects these
    # lines of every pass into its closing list.
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ").replace("\n", " ")
        terminalreporter.write_line(f"SKIP {rep.nodeid}: {reason}")
