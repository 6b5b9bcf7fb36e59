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
    env.setdefault("LSAN_OPTIONS", "suppressions=" + os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lsan.supp"))
    if extra:
        env.update(extra)
    return env


class TestDaemon:
    __test__ = False  # not a pytest class

    def __init__(self, tmp_path=None, *, models_dir=None, args=(), env=None,
                 start_timeout=30.0, wait_ready=True, socket=None, pass_socket=True,
                 user=None):
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
        self.proc = None
        self._log_path = os.path.join(self.dir, "convd.log")
        self._log = None

    def command(self):
        cmd = [paths.binary("convd")]
        if self.user is not None:
            pw = pwd.getpwnam(self.user)
            cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
                   "--clear-groups"] + cmd
        if self.pass_socket:
            cmd += ["--socket", self.socket]
        if self.models_dir is not None:
            cmd += ["--models", str(self.models_dir)]
        return cmd + self.args

    def start(self):
        env = process_env(self.env)
        self._log = open(self._log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env)
        if self.wait_ready:
            self._wait_ready()
        return self

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
