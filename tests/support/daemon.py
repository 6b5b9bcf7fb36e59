"""The one way to start a test daemon: a real convd on a temporary socket.

    with TestDaemon(tmp_path, models_dir=...) as d:
        d.socket        # path of the Unix socket
        d.proc          # subprocess.Popen
        d.stderr_text() # everything it logged so far

Every integration test (Python, C client, convctl, raw msgpack) uses this.
Tests of access control also use:

    TestDaemon(tmp, socket=PATH)         # the socket elsewhere (e.g. a 0755
                                         #   directory other users can enter)
    TestDaemon(tmp, pass_socket=False)   # no --socket: the daemon's default
    TestDaemon(tmp, user="nobody")       # run convd as that user (setpriv)

and the tests of convd under systemd:

    TestDaemon(tmp, notify=True)         # NOTIFY_SOCKET: a datagram socket of
                                         #   the test; start() waits for READY=1;
                                         #   d.wait_notify("RELOADING=1"),
                                         #   d.notifications (every state so far)
    TestDaemon(tmp, activate=True)       # socket activation as systemd does
                                         #   it: the test binds and listens on
                                         #   d.socket, convd gets it as fd 3 with
                                         #   LISTEN_FDS=1, LISTEN_PID=its pid
                                         #   (implies notify=True)
"""
import os
import pwd
import signal
import socket
import subprocess
import tempfile
import time

from . import paths


def process_env(extra=None):
    """The environment of a test daemon, also used by anything in the tests
    that must run the kernels as the daemon does (tests/support/slow_model.py
    times convd-run with it)."""
    env = dict(os.environ)
    # Leaks are checked explicitly at exit by LeakSanitizer in SAN builds.
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    # Set explicitly so convd does not re-exec itself to choose it (a
    # re-exec would also leave valgrind behind).
    env.setdefault("OMP_WAIT_POLICY", "passive")
    # The same for OpenMP's binding variables and OMP_DYNAMIC, which convd removes with a
    # re-exec (runtime/omp-env.c); a test that wants them passes them in extra.
    for k in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "OMP_DYNAMIC"):
        env.pop(k, None)
    env.setdefault("LSAN_OPTIONS", "suppressions=" + os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lsan.supp"))
    if extra:
        env.update(extra)
    return env


class TestDaemon:
    __test__ = False  # not a pytest class

    def __init__(self, tmp_path=None, *, models_dir=None, args=(), env=None,
                 start_timeout=30.0, wait_ready=True, socket=None, pass_socket=True,
                 user=None, notify=False, activate=False):
        self._own_tmp = None
        if tmp_path is None:
            # Short path: Unix socket paths are limited to 107 bytes.
            self._own_tmp = tempfile.TemporaryDirectory(prefix="convd-t")
            tmp_path = self._own_tmp.name
        self.dir = str(tmp_path)
        self.socket = os.path.join(self.dir, "convd.sock")
        if len(self.socket) > 100:
            self._own_tmp = tempfile.TemporaryDirectory(prefix="convd-t")
            self.dir = self._own_tmp.name
            self.socket = os.path.join(self.dir, "convd.sock")
        if socket is not None:
            self.socket = str(socket)
        self.pass_socket = pass_socket
        self.user = user
        self.models_dir = models_dir
        self.args = list(args)
        self.env = env
        self.start_timeout = start_timeout
        self.wait_ready = wait_ready
        self.activate = activate
        self.notify = notify or activate
        self.notifications = []  # every datagram received on the notify socket
        self._notify_sock = None
        self._listen_sock = None
        self.proc = None
        self._log_path = os.path.join(self.dir, "convd.log")
        self._log = None

    def command(self):
        cmd = [paths.binary("convd")]
        if self.user is not None:
            pw = pwd.getpwnam(self.user)
            cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
                   "--clear-groups"] + cmd
        if self.activate:
            # LISTEN_PID must be the daemon's own pid: a shell learns it and
            # execs convd (the pid stays).
            cmd = ["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh"] + cmd
        if self.pass_socket:
            cmd += ["--socket", self.socket]
        if self.models_dir is not None:
            cmd += ["--models", str(self.models_dir)]
        return cmd + self.args

    def start(self):
        env = process_env(self.env)
        extra = {}
        if self.notify:
            self._notify_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            path = os.path.join(self.dir, "notify.sock")
            if os.path.exists(path):
                os.unlink(path)
            self._notify_sock.bind(path)
            if self.user is not None:
                os.chmod(path, 0o777)
            env["NOTIFY_SOCKET"] = path
        if self.activate:
            self._listen_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listen_sock.bind(self.socket)
            self._listen_sock.listen(64)
            env.setdefault("LISTEN_FDS", "1")
            fd = self._listen_sock.fileno()

            def as_fd3():
                # In the child: the socket becomes descriptor 3, inheritable.
                if fd != 3:
                    os.dup2(fd, 3)
                else:
                    os.set_inheritable(3, True)
            # close_fds=False: Python's own descriptors are close-on-exec
            # already, and closing would take fd 3 too.
            extra = dict(preexec_fn=as_fd3, close_fds=False)
        self._log = open(self._log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env, **extra)
        if self._listen_sock is not None:
            self._listen_sock.close()  # convd holds it now, as under systemd
        if self.wait_ready:
            if self.notify:
                self.wait_notify("READY=1", self.start_timeout)
            else:
                self._wait_ready()
        return self

    def wait_notify(self, line, timeout=30.0):
        """Waits until a notification holding the line `line` ("READY=1")
        arrives after those already returned; returns that datagram's text.
        Fails if convd exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._notify_sock.settimeout(0.05)
            try:
                msg = self._notify_sock.recv(4096).decode("utf-8", "replace")
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"convd exited with {self.proc.returncode} before notifying {line}:\n"
                        + self.stderr_text())
                continue
            self.notifications.append(msg)
            if line in msg.split("\n"):
                return msg
        raise RuntimeError(f"no {line} from convd in {timeout}s (got {self.notifications}):\n"
                           + self.stderr_text())

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"convd exited with {self.proc.returncode} during start:\n"
                    + self.stderr_text())
            if os.path.exists(self.socket):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.socket)
                    return
                except OSError:
                    pass
                finally:
                    s.close()
            time.sleep(0.02)
        raise RuntimeError("convd did not start in time:\n" + self.stderr_text())

    def connect_raw(self, timeout=10.0):
        """A plain Unix stream socket to the daemon (no project code)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.socket)
        return s

    def stderr_text(self):
        try:
            with open(self._log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=None, timeout=30.0):
        """Stops the daemon (default SIGTERM); returns its exit code."""
        # (The default is not signal.SIGTERM in the signature: in the class
        # body `signal` names the method above, not the module.)
        if sig is None:
            sig = signal.SIGTERM
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("convd did not exit on signal:\n" + self.stderr_text())
        if self._log:
            self._log.close()
            self._log = None
        if self._notify_sock is not None:
            # What it said while stopping (STOPPING=1).
            self._notify_sock.setblocking(False)
            try:
                while True:
                    self.notifications.append(
                        self._notify_sock.recv(4096).decode("utf-8", "replace"))
            except OSError:
                pass
            self._notify_sock.close()
            self._notify_sock = None
        return self.proc.returncode

    def _status_kib(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def rss_kib(self):
        """Resident memory of the daemon now (VmRSS), KiB."""
        return self._status_kib("VmRSS")

    def rss_peak_kib(self):
        """Highest resident memory of the daemon so far (VmHWM), KiB: what a
        burst cost, even when the memory was given back since."""
        return self._status_kib("VmHWM")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        rc = self.stop()
        # A sanitizer report or a crash at exit fails the test that owned it.
        text = self.stderr_text()
        if self._own_tmp:
            self._own_tmp.cleanup()
        if exc[0] is None and rc not in (0, None):
            raise AssertionError(f"convd exited with {rc}:\n{text}")
        return False
