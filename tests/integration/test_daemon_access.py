"""Access control and the socket: who may connect (the socket file's mode and
group), who may call the admin methods (root, the daemon's own uid,
--admin-group; everyone else E_PERMISSION, counted in stats and metrics),
SIGHUP restoring the models directory over client-loaded models, the
start-up checks of the socket path and its default, and the metrics file's
temp file not following a planted symlink.

Clients of other users run as convctl under setpriv (the Python of the test
run may not be readable by them). Sockets those users must reach live in a
fresh 0755 directory under /tmp (pytest's own temp dirs are 0700)."""
import grp
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import numpy as np
import pytest

from tests.integration.daemon_wire import Wire, stats
from tests.models.builders import Graph, save
from tests.support import paths
from tests.support.daemon import TestDaemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv to act as other users")

NOBODY = pwd.getpwnam("nobody")
C, HW = 3, 6


def conv_model(path, seed, cout=4):
    g = Graph(np.random.default_rng(seed))
    y = g.relu(g.conv(g.input("x", [C, HW, HW]), C, cout, 3))
    return save(g.build([y], f"m{seed}"), path)


@pytest.fixture
def shared():
    """A 0755 directory that every user can enter (for sockets, models and
    inputs other users must reach); removed afterwards."""
    d = tempfile.mkdtemp(prefix="convd-acc-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_user(user, *args, group=None):
    """argv running args as `user` (its primary group, or `group`), without
    supplementary groups."""
    pw = pwd.getpwnam(user) if isinstance(user, str) else pwd.getpwuid(user)
    gid = grp.getgrnam(group).gr_gid if group else pw.pw_gid
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={gid}", "--clear-groups"] + list(args)


def ctl(d, *args, user=None, group=None):
    cmd = [paths.binary("convctl"), "--socket", d.socket] + list(args)
    if user is not None:
        cmd = as_user(user, *cmd, group=group)
    env = {k: v for k, v in os.environ.items() if k != "CONVD_SOCKET"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def models_in(shared, *seeds):
    md = os.path.join(shared, "models")
    os.makedirs(md, exist_ok=True)
    os.chmod(md, 0o755)
    for name, seed in seeds:
        conv_model(os.path.join(md, name + ".onnx"), seed)
    return md


def run_to_exit(d, timeout=30):
    d.wait_ready = False
    d.start()
    try:
        rc = d.proc.wait(timeout)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    return rc, d.stderr_text()


# ---- the socket file ---------------------------------------------------------

def test_socket_mode_is_0660_by_default(tmp_path):
    with TestDaemon(tmp_path) as d:
        st = os.stat(d.socket)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_gid == os.getegid()
        assert stats(d)["settings"]["socket-mode"] == "0660"


def test_socket_mode_and_group_as_configured(tmp_path):
    conf = tmp_path / "convd.conf"
    conf.write_text("socket-group = nogroup\n")   # the config file works too
    with TestDaemon(tmp_path, args=["--config", str(conf), "--socket-mode", "0640"]) as d:
        st = os.stat(d.socket)
        assert stat.S_IMODE(st.st_mode) == 0o640
        assert st.st_gid == grp.getgrnam("nogroup").gr_gid
        s = stats(d)["settings"]
        assert s["socket-group"] == "nogroup" and s["socket-mode"] == "0640"


def test_socket_mode_decides_who_connects(shared):
    # 0660 (default): nobody is not in root's group, cannot connect at all.
    with TestDaemon(shared, socket=os.path.join(shared, "a.sock")) as d:
        r = ctl(d, "health", user="nobody")
        assert r.returncode == 3 and "E_CONNECT" in r.stderr, r.stderr
    # 0660 with the socket's group nobody's: it can.
    with TestDaemon(shared, socket=os.path.join(shared, "b.sock"),
                    args=["--socket-group", str(NOBODY.pw_gid)]) as d:
        r = ctl(d, "health", user="nobody")
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--socket-mode", "999"], "socket-mode: '999' is not an octal mode"),
    (["--socket-mode", "0066"], "at least 0600"),
    (["--admin-group", "no-such-group-cd"], "admin-group: no group named 'no-such-group-cd'"),
    (["--socket-group", "no-such-group-cd"], "socket-group: no group named"),
    (["--shutdown-grace", "-1"], "shutdown-grace: -1 is out of range"),
], ids=["mode_not_octal", "mode_locks_out_owner", "admin_group", "socket_group", "grace"])
def test_bad_access_settings_exit_2(tmp_path, args, needle):
    rc, out = run_to_exit(TestDaemon(tmp_path, args=args))
    assert rc == 2 and needle in out, out
    assert len(out.strip().splitlines()) == 1, out


# ---- admin methods -----------------------------------------------------------

def test_non_admin_gets_e_permission_and_read_methods_work(shared):
    md = models_in(shared, ("m", 1))
    x = os.path.join(shared, "x.npy")
    np.save(x, np.random.default_rng(0).standard_normal((1, C, HW, HW)).astype(np.float32))
    os.chmod(x, 0o644)
    with TestDaemon(shared, models_dir=md, socket=os.path.join(shared, "convd.sock"),
                    args=["--socket-mode", "0666"]) as d:
        before = stats(d)["models"]["m"]["max_batch"]
        refused = [
            ctl(d, "load", "m2", "m.onnx", user="nobody"),
            ctl(d, "load", "m", "m.onnx", "--max-batch", "4096", user="nobody"),  # a limit
            ctl(d, "unload", "m", user="nobody"),
        ]
        for r, method in zip(refused, ["load", "load", "unload"]):
            assert r.returncode == 1, r.stderr
            assert r.stderr.startswith(f"convctl: E_PERMISSION: {method} is an admin method, "
                                       "allowed to root and uid 0 (the daemon's); no "
                                       "--admin-group is set; this peer is uid "
                                       f"{NOBODY.pw_uid} gid {NOBODY.pw_gid}"), r.stderr
        # Everything else stays open to it.
        for args in (["health"], ["models"], ["stats"], ["hello"], ["metrics"],
                     ["infer", "m", "--input", x]):
            r = ctl(d, *args, user="nobody")
            assert r.returncode == 0, (args, r.stderr)
        # Nothing changed, and the refusals are counted once each, by class.
        s = stats(d)
        assert set(s["models"]) == {"m"} and s["models"]["m"]["max_batch"] == before
        assert s["access"]["refused"] == {"load": 2, "unload": 1}
        assert s["errors"]["E_PERMISSION"] == 3
        with Wire.connect(d) as w:
            text = w.result("metrics")
        assert 'convd_access_refused_total{method="load"} 2' in text
        assert 'convd_access_refused_total{method="unload"} 1' in text
        assert 'convd_errors_total{code="E_PERMISSION"} 3' in text
        r = ctl(d, "stats")
        assert "access:" in r.stdout and "refused" in r.stdout, r.stdout
        # Root may.
        assert ctl(d, "load", "m2", "m.onnx").returncode == 0
        assert ctl(d, "unload", "m2").returncode == 0
    assert "load refused (E_PERMISSION) to uid 65534" in d.stderr_text()


def test_admin_group_by_primary_gid(shared):
    md = models_in(shared, ("m", 1))
    with TestDaemon(shared, models_dir=md, socket=os.path.join(shared, "convd.sock"),
                    args=["--socket-mode", "0666", "--admin-group", "nogroup"]) as d:
        r = ctl(d, "load", "m2", "m.onnx", "--max-batch", "5", user="nobody")
        assert r.returncode == 0, r.stderr
        assert stats(d)["models"]["m2"]["max_batch"] == 5
        # Not in the group (uid 1 "daemon", its own group): refused, with the rule.
        r = ctl(d, "unload", "m2", user="daemon")
        assert r.returncode == 1
        assert "members of group 'nogroup' (--admin-group)" in r.stderr, r.stderr
        assert ctl(d, "unload", "m2", user="nobody").returncode == 0


def _supplementary_member():
    """(user, group) where the user is a member of the group by /etc/group
    (not its primary group), or None."""
    for g in grp.getgrall():
        for name in g.gr_mem:
            try:
                pw = pwd.getpwnam(name)
            except KeyError:
                continue
            if pw.pw_uid != 0 and pw.pw_gid != g.gr_gid:
                return name, g.gr_name
    return None


def test_admin_group_by_supplementary_group(shared):
    found = _supplementary_member()
    if not found:
        pytest.skip("no user on this machine is a supplementary member of a group")
    user, group = found
    md = models_in(shared, ("m", 1))
    with TestDaemon(shared, models_dir=md, socket=os.path.join(shared, "convd.sock"),
                    args=["--socket-mode", "0666", "--admin-group", group]) as d:
        # setpriv drops the process's supplementary groups: the daemon looks
        # the user's groups up (getgrouplist), not the peer's credentials.
        r = ctl(d, "load", "m2", "m.onnx", user=user)
        assert r.returncode == 0, r.stderr
        r = ctl(d, "load", "m3", "m.onnx", user="nobody")
        assert r.returncode == 1 and "E_PERMISSION" in r.stderr


def test_daemon_own_uid_is_admin(shared):
    os.chown(shared, NOBODY.pw_uid, NOBODY.pw_gid)
    md = models_in(shared, ("m", 1))
    with TestDaemon(shared, models_dir=md, socket=os.path.join(shared, "convd.sock"),
                    user="nobody", args=["--socket-mode", "0666"]) as d:
        assert os.stat(d.socket).st_uid == NOBODY.pw_uid
        assert ctl(d, "load", "m2", "m.onnx", user="nobody").returncode == 0  # its own uid
        assert ctl(d, "unload", "m2").returncode == 0                         # root
        r = ctl(d, "load", "m2", "m.onnx", user="daemon")
        assert r.returncode == 1, r.stderr
        assert f"allowed to root and uid {NOBODY.pw_uid} (the daemon's)" in r.stderr


# ---- SIGHUP: the models directory is the source of truth ---------------------

def wait_for(pred, timeout=60):
    """Waits until pred() holds; the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)  # polls the state waited for
    return pred()


def test_rescan_restores_directory_version_over_client_load(tmp_path):
    md = tmp_path / "models"
    md.mkdir()
    conv_model(md / "a.onnx", 1, cout=4)
    sub = md / "sub"
    sub.mkdir()
    conv_model(sub / "other.onnx", 2, cout=7)
    with TestDaemon(tmp_path, models_dir=md) as d, Wire.connect(d, timeout=60) as w:
        out_c = lambda: w.result("models")["models"][0]["outputs"][0]["shape"][1]
        assert out_c() == 4
        # An admin replaces the directory's model with another file and limits.
        w.result("load", {"name": "a", "path": "sub/other.onnx", "max_queue": 1000000,
                          "max_delay_us": 10000000})
        assert out_c() == 7
        assert w.result("stats")["models"]["a"]["max_queue"] == 1000000
        d.signal(signal.SIGHUP)
        assert wait_for(lambda: out_c() == 4)
        m = w.result("stats")["models"]["a"]
        assert (m["max_queue"], m["max_delay_us"]) == (2048, 0)  # the daemon's defaults
        assert w.result("models")["models"][0]["path"] == "a.onnx"
    assert ("rescan: loading a from a.onnx (restoring the directory's version over the "
            "one a client loaded)") in d.stderr_text()


# ---- the socket path at start -------------------------------------------------

def test_world_writable_directory_is_refused(shared):
    os.chmod(shared, 0o777)
    rc, out = run_to_exit(TestDaemon(shared, socket=os.path.join(shared, "convd.sock")))
    assert rc == 1, out
    assert f"its directory {shared} is writable by every user and not sticky" in out
    assert not os.path.exists(os.path.join(shared, "convd.sock"))
    os.chmod(shared, 0o1777)  # sticky (like /tmp): others cannot replace our file
    with TestDaemon(shared, socket=os.path.join(shared, "convd.sock")) as d:
        assert stat.S_ISSOCK(os.stat(d.socket).st_mode)


def test_directory_of_another_user_is_refused(shared):
    os.chown(shared, NOBODY.pw_uid, NOBODY.pw_gid)
    rc, out = run_to_exit(TestDaemon(shared, socket=os.path.join(shared, "convd.sock")))
    assert rc == 1, out
    assert f"its directory {shared} belongs to uid {NOBODY.pw_uid}" in out


def test_socket_of_another_user_is_refused(tmp_path):
    path = os.path.join(str(tmp_path), "convd.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)  # live or not: it is not ours
    try:
        os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        ino = os.stat(path).st_ino
        rc, out = run_to_exit(TestDaemon(tmp_path))
        assert rc == 1, out
        assert f"a socket of uid {NOBODY.pw_uid} is already there, not ours" in out
        assert os.stat(path).st_ino == ino  # left alone
    finally:
        s.close()


def test_default_socket_is_in_xdg_runtime_dir(shared):
    run = os.path.join(shared, "run")
    os.mkdir(run, 0o700)
    os.chown(run, NOBODY.pw_uid, NOBODY.pw_gid)
    d = TestDaemon(shared, user="nobody", pass_socket=False,
                   socket=os.path.join(run, "convd.sock"), env={"XDG_RUNTIME_DIR": run})
    with d:
        st = os.stat(d.socket)
        assert st.st_uid == NOBODY.pw_uid and stat.S_IMODE(st.st_mode) == 0o660
        # The clients find it by the same rule (as that user; root would look
        # in /run/convd).
        r = subprocess.run(as_user("nobody", paths.binary("convctl"), "health"),
                           capture_output=True, text=True, timeout=60,
                           env={"PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": run})
        assert r.returncode == 0, r.stderr
    assert "listening on " + os.path.join(run, "convd.sock") in d.stderr_text()


def test_no_default_socket_without_xdg_runtime_dir(shared):
    env = {"XDG_RUNTIME_DIR": ""}
    rc, out = run_to_exit(TestDaemon(shared, user="nobody", pass_socket=False, env=env))
    assert rc == 1, out
    assert "no --socket given and XDG_RUNTIME_DIR is not set" in out


# ---- the metrics file ------------------------------------------------------------

def test_metrics_tmp_symlink_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    prom = tmp_path / "convd.prom"
    os.symlink(victim, str(prom) + ".tmp")  # planted where the daemon writes first
    with TestDaemon(tmp_path, args=["--metrics-file", str(prom)]) as d:
        assert wait_for(lambda: prom.exists())
        assert "convd_uptime_seconds" in prom.read_text()
    assert victim.read_text() == "precious\n"
    assert not os.path.islink(str(prom) + ".tmp")
    assert not os.path.islink(prom)
