"""Runs one test of a C test binary built on tests/unit/main.c (cd-tests,
cd-client-tests) and maps its result onto pytest: a failure asserts with the
binary's output, a CD_SKIP becomes pytest.skip with the test's own reason."""
import re
import subprocess

import pytest

from tests.support import paths


def run(binary, name, timeout, env=None):
    r = subprocess.run([paths.binary(binary), name], capture_output=True, text=True,
                       timeout=timeout, env=env)
    check(name, r.returncode, r.stdout, r.stderr)


def check(name, returncode, out, err):
    """Fails or skips from a finished run of test `name`."""
    assert returncode == 0, out + err
    m = re.search(rf"^skip {re.escape(name)}: (.*)$", out, re.M)
    if m:
        pytest.skip(m.group(1))
    # The runner's closing line: exactly this one test ran and passed.
    assert re.search(r"^1 passed, 0 failed, 0 skipped$", out, re.M), out + err
