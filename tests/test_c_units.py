"""Runs every C unit test (tests/unit/*.c, one binary) as its own pytest case,
so the whole suite ends with one summary line."""
import os
import subprocess

import pytest

from tests.support import paths


def _names():
    try:
        out = subprocess.run([paths.binary("cd-tests"), "--list"], check=True,
                             capture_output=True, text=True).stdout
    except (FileNotFoundError, subprocess.CalledProcessError):
        return ["<cd-tests missing>"]
    return [n for n in out.split() if n]


@pytest.mark.parametrize("name", _names())
def test_c(name):
    r = subprocess.run([paths.binary("cd-tests"), name], capture_output=True,
                       text=True, timeout=int(os.environ.get("CD_TEST_TIMEOUT", "300")))
    assert r.returncode == 0, r.stdout + r.stderr
