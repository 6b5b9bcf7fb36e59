"""convd under systemd, with the test standing in for systemd: socket
activation (the listening socket as fd 3, LISTEN_FDS/LISTEN_PID) and the
notify protocol (READY=1, STATUS=, RELOADING=1, STOPPING=1, WATCHDOG=1 as
datagrams to NOTIFY_SOCKET). daemon/systemd.h says what convd sends when."""
import os
import signal
import stat
import time

import numpy as np
import pytest

from convd import Client
from tests.integration.client_models import scale2_reference, write_scale2
from tests.support.daemon import TestDaemon


def infer_once(sock_path):
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 7)).astype(np.float32)
    with Client(sock_path) as c:
        out = c.infer("scale2", {"x": x})
    np.testing.assert_allclose(out["y"], scale2_reference(x), rtol=1e-6)


def test_socket_activation_serves_on_the_passed_socket(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    write_scale2(models / "scale2.onnx")
    with TestDaemon(tmp_path, models_dir=models, activate=True, pass_socket=False) as d:
        assert "socket activation" in d.stderr_text()
        infer_once(d.socket)
        with Client(d.socket) as c:
            assert c.health()["status"] == "ok"
    # The socket file is systemd's (here the test's): convd leaves it.
    assert stat.S_ISSOCK(os.lstat(d.socket).st_mode)


def test_socket_activation_ignores_variables_meant_for_another_process(tmp_path):
    # LISTEN_PID of someone else: convd binds --socket as usual and does not
    # pass the variables on.
    with TestDaemon(tmp_path, env={"LISTEN_FDS": "1", "LISTEN_PID": "1"}) as d:
        assert "socket activation" not in d.stderr_text()
        with Client(d.socket) as c:
            assert c.health()["status"] == "ok"


def test_socket_activation_refuses_several_sockets(tmp_path):
    d = TestDaemon(tmp_path, activate=True, env={"LISTEN_FDS": "2"}, wait_ready=False)
    d.start()
    try:
        assert d.proc.wait(30) == 1
        assert "LISTEN_FDS=2" in d.stderr_text()
    finally:
        d.stop()


def test_notify_ready_and_status_once_models_are_loaded(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    write_scale2(models / "scale2.onnx")
    with TestDaemon(tmp_path, models_dir=models, notify=True) as d:
        ready = d.notifications[-1].split("\n")
        assert "READY=1" in ready
        status = [l for l in ready if l.startswith("STATUS=")]
        assert status == [f"STATUS=serving 1 model(s) on {d.socket}"], ready
        # READY=1 comes after the model is loaded: it is served at once.
        infer_once(d.socket)
    assert any("STOPPING=1" in m.split("\n") for m in d.notifications), d.notifications


def test_reload_is_notified_around_the_models_rescan(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    with TestDaemon(tmp_path, models_dir=models, notify=True) as d:
        assert "STATUS=serving 0 model(s) on " + d.socket in d.notifications[-1].split("\n")
        write_scale2(models / "scale2.onnx")
        d.signal(signal.SIGHUP)
        reloading = d.wait_notify("RELOADING=1", 30)
        assert any(l.startswith("MONOTONIC_USEC=") for l in reloading.split("\n"))
        ready = d.wait_notify("READY=1", 60)
        # READY=1 again once the rescan's load has finished.
        assert "STATUS=serving 1 model(s) on " + d.socket in ready.split("\n"), ready
        infer_once(d.socket)


def test_watchdog_pings_at_half_the_interval(tmp_path):
    # A watchdog is a time contract: systemd kills a service that misses
    # WATCHDOG_USEC. Pings are timed as they arrive; the median gap is
    # judged (one late ping on a loaded machine does not decide it): about
    # half the interval, never more often than that, and well inside it.
    interval = 1.0
    with TestDaemon(tmp_path, notify=True, env={"WATCHDOG_USEC": str(int(interval * 1e6))}) as d:
        d.wait_notify("WATCHDOG=1", 60)
        times = [time.monotonic()]
        for _ in range(6):
            d.wait_notify("WATCHDOG=1", 60)  # hang guard
            times.append(time.monotonic())
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    median = gaps[len(gaps) // 2]
    assert 0.4 * interval <= median < interval, gaps
    # WATCHDOG_PID of another process: the watchdog is not ours.
    with TestDaemon(tmp_path, notify=True,
                    env={"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"}) as d:
        with pytest.raises(RuntimeError):
            d.wait_notify("WATCHDOG=1", 1)


def test_no_notify_socket_no_notifications(tmp_path):
    # The ordinary start: nothing to notify, nothing logged about it.
    with TestDaemon(tmp_path) as d:
        pass
    assert "NOTIFY" not in d.stderr_text()


def test_unreachable_notify_socket_is_one_warning_not_a_failure(tmp_path):
    with TestDaemon(tmp_path, env={"NOTIFY_SOCKET": str(tmp_path / "nobody-here")}) as d:
        with Client(d.socket) as c:
            assert c.health()["status"] == "ok"
    assert d.stderr_text().count("cannot notify") == 1
