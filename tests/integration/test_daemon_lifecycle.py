"""convd's process life: settings (flags, config file, precedence, bad
values), start-up on a stale or live socket, and shutdown on SIGTERM/SIGINT
with requests in flight."""
import os
import signal
import socket
import time

import pytest

from tests.integration.daemon_wire import Wire, request, stats
from tests.support.daemon import TestDaemon


def run_to_exit(tmp_path, args, timeout=20):
    """Starts convd with args, waits for it to exit; returns (rc, output)."""
    d = TestDaemon(tmp_path, args=args, wait_ready=False)
    d.start()
    try:
        rc = d.proc.wait(timeout)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    return rc, d.stderr_text()


# ---- settings ----------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["--no-such-flag"], "unknown flag '--no-such-flag'"),
    (["--threads"], "--threads needs a value"),
    (["--threads", "many"], "threads: 'many' is not an integer"),
    (["--threads", "-1"], "threads: -1 is out of range"),
    (["--max-message", "1"], "max-message: 1 is out of range"),
    (["--max-message", "12Q"], "is not a byte count"),
    (["--log-level", "loud"], "'loud' is not one of debug|info|warn|error"),
    (["--max-connections", "0"], "max-connections: 0 is out of range"),
    (["--device", "tpu"], "'tpu' is not a device"),
    (["positional"], "unexpected argument 'positional'"),
    (["--help=yes"], "--help takes no value"),
    (["--config", "/nonexistent/convd.conf"], "cannot read config file"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_flag_exits_2_with_message(tmp_path, args, needle):
    rc, out = run_to_exit(tmp_path, args)
    assert rc == 2, out
    assert needle in out, out
    assert len(out.strip().splitlines()) == 1, out  # one clear line


def test_help_lists_every_flag_and_exits_0(tmp_path):
    rc, out = run_to_exit(tmp_path, ["--help"])
    assert rc == 0
    for flag in ("--socket", "--models", "--threads", "--device", "--max-message",
                 "--log-level", "--config", "--max-connections", "--help",
                 "--version", "--socket-mode", "--socket-group", "--admin-group",
                 "--shutdown-grace", "/run/convd/convd.sock as root",
                 "$XDG_RUNTIME_DIR/convd.sock"):
        assert flag in out, flag


def test_version_exits_0(tmp_path):
    rc, out = run_to_exit(tmp_path, ["--version"])
    assert rc == 0 and "convd 0.1.0" in out


def test_hip_device_unavailable_exits_1(tmp_path):
    # The GPU=hip plugin missing, or present but no AMD GPU here (see
    # tests/models/test_hip_emu_models.py for both cases in detail).
    rc, out = run_to_exit(tmp_path, ["--device", "hip:0"])
    assert rc == 1 and ("no AMD GPU found" in out or "cannot load" in out), out


def test_config_file_and_flag_precedence(tmp_path):
    conf = tmp_path / "convd.conf"
    conf.write_text(
        "# convd settings\n"
        "\n"
        "max-message = 2M\n"
        "  max-inflight=7   # trailing comment\n"
        "log-level = debug\n"
        "drain-timeout = 5\n")
    with TestDaemon(tmp_path, args=["--config", str(conf), "--max-inflight", "9",
                                     "--drain-timeout=6"]) as d:
        s = stats(d)["settings"]
        assert s["max-message"] == 2 << 20      # from the file
        assert s["log-level"] == "debug"        # from the file
        assert s["max-inflight"] == 9           # flag beats file
        assert s["drain-timeout"] == 6          # flag (--name=value) beats file
        assert s["config"] == str(conf)
        assert s["max-connections"] == 1024     # built-in default
    assert " debug " in d.stderr_text()         # log-level applied


@pytest.mark.parametrize("text,needle", [
    ("threads = 2\nbogus = 1\n", "convd.conf:2: unknown setting 'bogus'"),
    ("threads\n", "convd.conf:1: expected 'name = value'"),
    ("threads = lots\n", "convd.conf:1: threads: 'lots' is not an integer"),
    ("config = other.conf\n", "convd.conf:1: unknown setting 'config' (command line only)"),
], ids=["unknown_key", "no_equals", "bad_value", "cli_only_key"])
def test_bad_config_file_exits_2(tmp_path, text, needle):
    conf = tmp_path / "convd.conf"
    conf.write_text(text)
    rc, out = run_to_exit(tmp_path, ["--config", str(conf)])
    assert rc == 2, out
    assert needle in out, out


# ---- start-up on an existing socket path -------------------------------------

def test_stale_socket_file_is_replaced(tmp_path):
    path = os.path.join(str(tmp_path), "convd.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()  # leaves the file; nobody listens: a crashed daemon's leftover
    assert os.path.exists(path)
    with TestDaemon(tmp_path) as d:
        assert d.socket == path
        with Wire.connect(d) as w:
            assert w.result("health")["status"] == "ok"
    assert "replaced stale socket file" in d.stderr_text()


def test_live_daemon_is_not_displaced(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    with TestDaemon(a_dir) as a:
        ino = os.stat(a.socket).st_ino
        rc, out = run_to_exit(b_dir, ["--socket", a.socket])
        assert rc == 1, out
        assert "another daemon is already listening on " + a.socket in out
        assert os.stat(a.socket).st_ino == ino  # the live one's file untouched
        with Wire.connect(a) as w:
            assert w.result("hello")["server"] == "convd"
    assert a.proc.returncode == 0


def test_path_that_is_not_a_socket_is_left_alone(tmp_path):
    path = tmp_path / "convd.sock"
    path.write_text("precious")
    (tmp_path / "run").mkdir()
    rc, out = run_to_exit(tmp_path / "run", ["--socket", str(path)])
    assert rc == 1 and "is not a socket" in out
    assert path.read_text() == "precious"


# ---- shutdown ----------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
def test_signal_with_requests_in_flight(tmp_path, sig):
    d = TestDaemon(tmp_path).start()
    try:
        busy = [Wire.connect(d) for _ in range(4)]
        idle = Wire.connect(d)
        assert idle.result("health")["status"] == "ok"
        n = 3000
        for k, w in enumerate(busy):
            w.send(b"".join(request(k * n + i, "stats" if i % 7 == 0 else "hello")
                            for i in range(n)))
        d.signal(sig)
        # Every request sent before the signal is answered, then EOF.
        for k, w in enumerate(busy):
            msgs = w.expect_eof()
            assert sorted(m[1] for m in msgs) == [k * n + i for i in range(n)]
            assert all(m[2] is None for m in msgs)
        assert idle.expect_eof() == []  # an idle connection is just closed
        assert d.proc.wait(30) == 0
        assert not os.path.exists(d.socket)
        log = d.stderr_text()
        assert ("SIGTERM" if sig == signal.SIGTERM else "SIGINT") in log
        assert "exiting" in log
    finally:
        d.stop()


def wait_partial_read(d, timeout=60):
    """Waits until the daemon holds the bytes of a partial message (its
    limits.buffered_bytes; asked on a connection of its own, closed again
    before returning); the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout
    with Wire.connect(d) as probe:
        while probe.result("stats")["limits"]["buffered_bytes"] == 0:
            assert time.monotonic() < deadline, "the partial message was never read"
            time.sleep(0.01)  # polls the counter: the state waited for
        # The daemon must have seen the probe's close too, or the drain
        # would wait for it.
    while stats(d)["connections"]["current"] > 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)  # polls the counter: the state waited for


def test_no_new_connections_after_signal(tmp_path):
    d = TestDaemon(tmp_path).start()
    try:
        w = Wire.connect(d)
        w.send(request(1, "hello")[:3])  # keep the daemon draining: partial message
        wait_partial_read(d)
        d.signal(signal.SIGTERM)
        deadline = time.monotonic() + 60  # hang guard
        while os.path.exists(d.socket) and time.monotonic() < deadline:
            time.sleep(0.01)  # polls for the socket file's removal
        assert not os.path.exists(d.socket)
        with pytest.raises(OSError):
            d.connect_raw()
        # The draining daemon still answers the connection it has.
        w.send(request(1, "hello")[3:] + request(2, "health") +
               request(3, "load", {"name": "m", "path": "m.onnx"}))
        msgs = w.recv(3)
        assert msgs[0][3]["server"] == "convd"
        assert msgs[1][3]["status"] == "draining"
        assert msgs[2][2]["code"] == "E_SHUTDOWN"  # no new models while draining
        w.close()
        assert d.proc.wait(30) == 0
    finally:
        d.stop()


def test_drain_timeout_closes_stuck_connections(tmp_path):
    d = TestDaemon(tmp_path, args=["--drain-timeout", "1"]).start()
    try:
        w = Wire.connect(d)
        w.send(request(1, "hello")[:3])  # a message that never completes
        wait_partial_read(d)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        assert w.expect_eof(timeout=60) == []
        assert d.proc.wait(60) == 0
        assert time.monotonic() - t0 > 0.8  # not before the drain timeout
        assert "drain timeout" in d.stderr_text()
    finally:
        d.stop()


def test_log_line_format(tmp_path):
    import re
    with TestDaemon(tmp_path) as d:
        pass
    lines = d.stderr_text().splitlines()
    pat = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (debug|info |warn |error) \S")
    assert lines and all(pat.match(l) for l in lines), lines
    assert any(l.endswith("info  listening on " + d.socket) for l in lines), lines
