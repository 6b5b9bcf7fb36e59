"""Runs every C unit test (tests/unit/*.c, one binary) as its own pytest case,
so the whole suite ends with one summary line. The tests that run HIP kernels
under the emulator (hip_*, backend_ops_*) run a second time at a wavefront
size of 32 (CD_HIP_EMU_WAVE_SIZE=32, as on gfx10+; the default is 64).
A test that calls CD_SKIP is reported as skipped with its reason."""
import os
import subprocess

import pytest

from tests.support import cunit, paths


def _names():
    try:
        out = subprocess.run([paths.binary("cd-tests"), "--list"], check=True,
                             capture_output=True, text=True).stdout
    except (FileNotFoundError, subprocess.CalledProcessError):
        return ["<cd-tests missing>"]
    return [n for n in out.split() if n]


def _run(name, env=None):
    cunit.run("cd-tests", name, int(os.environ.get("CD_TEST_TIMEOUT", "300")), env)


@pytest.mark.parametrize("name", _names())
def test_c(name):
    _run(name)


@pytest.mark.parametrize("name", [n for n in _names() if n.startswith(("hip_", "backend_ops_"))])
def test_c_wave32(name):
    _run(name, dict(os.environ, CD_HIP_EMU_WAVE_SIZE="32"))
