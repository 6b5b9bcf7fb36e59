"""Runs the C client tests (tests/client/*.c -> build/bin/cd-client-tests, linked
with libconvd only) one by one as pytest cases.

  client_daemon_*        against a real daemon (TestDaemon), via $CONVD_SOCKET
  client_daemon_infer_*,
  client_daemon_load_*,
  client_daemon_plan_*   need the daemon's model methods and runtime: skipped
                         (with the reason) until the daemon can load the test model
  client_daemon_stopped_* the driver stops the daemon while the test runs
  other client_*         no daemon needed (scripted fake server, local checks)
"""
import os
import subprocess

import pytest

from tests.support import cunit, paths
from tests.support.daemon import TestDaemon


TIMEOUT = int(os.environ.get("CD_TEST_TIMEOUT", "120"))


def _names():
    try:
        out = subprocess.run([paths.binary("cd-client-tests"), "--list"], check=True,
                             capture_output=True, text=True).stdout
    except (FileNotFoundError, subprocess.CalledProcessError):
        return ["<cd-client-tests missing>"]
    return [n for n in out.split() if n]


NAMES = _names()
MODEL_TESTS = [n for n in NAMES if n.startswith(("client_daemon_infer_", "client_daemon_load_",
                                                  "client_daemon_plan_"))]
STOP_TESTS = [n for n in NAMES if n.startswith("client_daemon_stopped")]
DAEMON_TESTS = [n for n in NAMES if n.startswith("client_daemon_")
                and n not in MODEL_TESTS and n not in STOP_TESTS]
LOCAL_TESTS = [n for n in NAMES if not n.startswith("client_daemon_")]


def _run(name, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    env.update(env_extra or {})
    cunit.run("cd-client-tests", name, TIMEOUT, env)


@pytest.mark.parametrize("name", LOCAL_TESTS)
def test_c_client_local(name):
    _run(name)


@pytest.mark.parametrize("name", DAEMON_TESTS)
def test_c_client_daemon(name, scale2_daemon):
    _run(name, {"CONVD_SOCKET": scale2_daemon.socket})


@pytest.mark.parametrize("name", MODEL_TESTS)
def test_c_client_models(name, scale2_daemon):
    _run(name, {"CONVD_SOCKET": scale2_daemon.socket, "CONVD_TEST_MODEL": "scale2",
                "CONVD_TEST_MODEL_PATH": "scale2.onnx"})


@pytest.mark.parametrize("name", STOP_TESTS)
def test_c_client_daemon_stopped(name, tmp_path):
    d = TestDaemon(tmp_path).start()
    env = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    env["CONVD_SOCKET"] = d.socket
    p = subprocess.Popen([paths.binary("cd-client-tests"), name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.strip() == "ready", line + p.stderr.read()
        assert d.stop() == 0, d.stderr_text()
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        d.stop()
    cunit.check(name, p.returncode, line + out, err)
