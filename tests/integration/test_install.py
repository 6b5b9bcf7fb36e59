"""`make install` and what it lays out: the files (and `make uninstall`
removing exactly them), a C program built with `pkg-config convd` against the
installed tree talking to a daemon, the systemd units (systemd-analyze
verify), the man pages (no groff warnings), the bash completion, the example
config, and one version everywhere (VERSION)."""
import os
import re
import shutil
import subprocess

import pytest

from tests.integration.client_models import write_scale2
from tests.support import paths
from tests.support.daemon import TestDaemon

VERSION = (paths.ROOT / "VERSION").read_text().strip()
BUILD = os.environ.get("CONVD_BUILD", "build")
# make's switch for the build folder the suite runs on.
MAKE_FLAGS = {"build-san": ["SAN=1"], "build-tsan": ["TSAN=1"]}.get(BUILD, [])
# A sanitizer build's library needs the sanitizer runtimes in the application.
APP_FLAGS = {"build-san": ["-fsanitize=address,undefined"],
             "build-tsan": ["-fsanitize=thread"]}.get(BUILD, [])

# What `make install DESTDIR=... PREFIX=/usr` must lay out (the HIP plugin
# only when the build has it).
EXPECTED = {
    "usr/bin/convd", "usr/bin/convctl", "usr/bin/convbench",
    f"usr/lib/libconvd.so.{VERSION}", "usr/lib/libconvd.so.0", "usr/lib/libconvd.so",
    "usr/lib/libconvd.a", "usr/include/convd.h", "usr/lib/pkgconfig/convd.pc",
    "usr/share/man/man8/convd.8", "usr/share/man/man1/convctl.1",
    "usr/share/man/man1/convbench.1", "usr/share/man/man5/convd.conf.5",
    "usr/lib/systemd/system/convd.service", "usr/lib/systemd/system/convd.socket",
    "usr/lib/sysusers.d/convd.conf", "usr/lib/tmpfiles.d/convd.conf",
    "usr/share/bash-completion/completions/convctl",
    "usr/share/doc/convd/convd.conf.example", "etc/convd/convd.conf",
    "usr/share/convd/install-manifest",
}
MAN_PAGES = ["man8/convd.8", "man1/convctl.1", "man1/convbench.1", "man5/convd.conf.5"]


def make(*args):
    # Not a sub-make of the `make test` that may be running us.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-s", *MAKE_FLAGS, *args], cwd=paths.ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def files_under(root):
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """`make install DESTDIR=<tmp> PREFIX=/usr`: the staging folder."""
    dest = tmp_path_factory.mktemp("stage")
    make("install", f"DESTDIR={dest}", "PREFIX=/usr")
    return dest


def test_install_lays_out_every_file(staged):
    expected = set(EXPECTED)
    if (paths.LIB / "libconvd-hip.so").exists():
        expected.add("usr/lib/convd/libconvd-hip.so")
    assert files_under(staged) == expected
    lib = staged / "usr/lib"
    assert os.readlink(lib / "libconvd.so") == "libconvd.so.0"
    assert os.readlink(lib / "libconvd.so.0") == f"libconvd.so.{VERSION}"
    dyn = subprocess.run(["readelf", "-d", str(lib / f"libconvd.so.{VERSION}")],
                         capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libconvd.so.0]" in dyn
    assert os.access(staged / "usr/bin/convd", os.X_OK)
    # The units name the installed paths, not the build tree.
    service = (staged / "usr/lib/systemd/system/convd.service").read_text()
    assert "ExecStart=/usr/bin/convd --config /etc/convd/convd.conf" in service
    assert not re.search(r"@[A-Z]+@", service)
    manifest = (staged / "usr/share/convd/install-manifest").read_text().split()
    assert {m.lstrip("/") for m in manifest if not m.endswith("/")} == expected


def test_uninstall_removes_exactly_what_was_installed(tmp_path):
    dest = tmp_path / "stage"
    other = dest / "usr/bin/someone-elses-tool"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    make("install", f"DESTDIR={dest}", "PREFIX=/usr")
    make("uninstall", f"DESTDIR={dest}", "PREFIX=/usr")
    assert files_under(dest) == {"usr/bin/someone-elses-tool"}
    # convd's own folders are gone, the shared ones stay.
    assert not (dest / "usr/share/doc/convd").exists()
    assert not (dest / "etc/convd").exists()
    assert (dest / "usr/lib").is_dir()


def test_uninstall_keeps_a_config_the_operator_changed(tmp_path):
    dest = tmp_path / "stage"
    make("install", f"DESTDIR={dest}", "PREFIX=/usr")
    conf = dest / "etc/convd/convd.conf"
    conf.write_text(conf.read_text() + "workers = 4\n")
    # A second install keeps it too.
    make("install", f"DESTDIR={dest}", "PREFIX=/usr")
    assert conf.read_text().endswith("workers = 4\n")
    make("uninstall", f"DESTDIR={dest}", "PREFIX=/usr")
    assert files_under(dest) == {"etc/convd/convd.conf"}


APP = r"""
#include <convd.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    convd_conn *c = NULL;
    if (convd_connect(argv[1], NULL, &c) != 0) {
        fprintf(stderr, "connect: %s\n", convd_errmsg(NULL));
        return 11;
    }
    convd_hello_info h;
    if (convd_hello(c, &h) != 0) return 12;
    convd_health_info st;
    if (convd_health(c, &st) != 0) return 13;
    printf("%s %s %s %s\n", convd_version(), h.server, h.version, st.status);
    convd_close(c);
    return 0;
}
"""


def test_pkg_config_program_links_the_installed_library_and_talks_to_convd(staged, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(staged / "usr/lib/pkgconfig"),
               PKG_CONFIG_SYSROOT_DIR=str(staged))
    def pkg_config(*args):
        return subprocess.run(["pkg-config", *args, "convd"], env=env, capture_output=True,
                              text=True, check=True).stdout.split()
    assert pkg_config("--modversion") == [VERSION]
    flags = pkg_config("--cflags", "--libs")
    assert f"-I{staged}/usr/include" in flags and f"-L{staged}/usr/lib" in flags, flags
    src = tmp_path / "app.c"
    src.write_text(APP)
    exe = tmp_path / "app"
    r = subprocess.run(["cc", "-std=c11", *APP_FLAGS, str(src), "-o", str(exe), *flags],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # The program finds libconvd.so.0 (its soname) in the installed tree.
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    assert "Shared library: [libconvd.so.0]" in needed
    with TestDaemon() as d:
        r = subprocess.run([str(exe), d.socket], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, LD_LIBRARY_PATH=str(staged / "usr/lib")))
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.split() == [VERSION, "convd", VERSION, "ok"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_units_pass_verify(tmp_path):
    # Installed into a real prefix (no DESTDIR): verify checks that
    # ExecStart's binary exists and that the Documentation= pages are found.
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    units = prefix / "lib/systemd/system"
    env = dict(os.environ, MANPATH=f"{prefix}/share/man:")
    r = subprocess.run(["systemd-analyze", "verify", str(units / "convd.socket"),
                        str(units / "convd.service")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr
    service = (units / "convd.service").read_text()
    for line in ["Type=notify", "ExecReload=kill -HUP $MAINPID", "ProtectSystem=strict",
                 "RuntimeDirectory=convd", "User=convd", "WatchdogSec=60"]:
        assert line in service.splitlines(), line
    assert "ListenStream=/run/convd/convd.sock" in (units / "convd.socket").read_text()


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_page_renders_without_warnings(staged, page):
    path = staged / "usr/share/man" / page
    text = path.read_text()
    assert not re.search(r"@[A-Z]+@", text), "an unfilled @...@ in " + page
    if shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-z", "-ww", str(path)], capture_output=True,
                           text=True)
        assert r.returncode == 0 and r.stderr == "", r.stderr
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", "-Tutf8", str(path)], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80"))
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert "SEE ALSO" in re.sub(".\x08", "", r.stdout)  # without overstrikes


def test_convd_conf_page_lists_every_setting(staged):
    page = (staged / "usr/share/man/man5/convd.conf.5").read_text()
    out = subprocess.run([paths.binary("convd"), "--help"], capture_output=True, text=True,
                         check=True).stdout
    names = [l.split()[0][2:] for l in out.splitlines() if l.startswith("  --")]
    for name in names:
        if name in ("help", "version"):
            continue
        assert "\\fB%s\\fP" % name.replace("-", "\\-") in page, name


def test_example_config_is_valid(staged, tmp_path):
    # The installed example, with the paths of this test machine over it.
    example = staged / "usr/share/doc/convd/convd.conf.example"
    args = ["--config", str(example), "--models", "", "--admin-group", "",
            "--tune-cache", str(tmp_path)]
    with TestDaemon(tmp_path, args=args, notify=True) as d:
        assert "READY=1" in d.notifications[-1].split("\n")


def test_bash_completion_completes_commands_and_options(staged):
    comp = staged / "usr/share/bash-completion/completions/convctl"
    script = f"""
        source {comp}
        COMP_WORDS=(convctl he); COMP_CWORD=1; _convctl; echo "${{COMPREPLY[*]}}"
        COMP_WORDS=(convctl --ver); COMP_CWORD=1; _convctl; echo "${{COMPREPLY[*]}}"
        COMP_WORDS=(convctl top --); COMP_CWORD=2; _convctl; echo "${{COMPREPLY[*]}}"
    """
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert sorted(lines[0].split()) == ["health", "hello", "help"]
    assert lines[1] == "--version"
    assert "--interval" in lines[2].split() and "--count" in lines[2].split()


def test_bash_completion_offers_the_loaded_models(staged, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    write_scale2(models / "scale2.onnx")
    comp = staged / "usr/share/bash-completion/completions/convctl"
    with TestDaemon(tmp_path, models_dir=models) as d:
        script = f"""
            source {comp}
            COMP_WORDS=(convctl --socket {d.socket} infer s); COMP_CWORD=4; _convctl
            echo "${{COMPREPLY[*]}}"
        """
        env = dict(os.environ, PATH=f"{paths.BIN}:{os.environ['PATH']}")
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                           env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["scale2"]


def test_one_version_everywhere(daemon):
    def out(*cmd):
        return subprocess.run(list(cmd), capture_output=True, text=True, check=True,
                              timeout=60).stdout
    assert out(paths.binary("convd"), "--version").splitlines()[0].startswith(
        f"convd {VERSION} ")
    assert out(paths.binary("convctl"), "--version").startswith(
        f"convctl {VERSION} (libconvd {VERSION}")
    assert out(paths.binary("convbench"), "--version").startswith(f"convbench {VERSION} ")
    assert f"version   {VERSION}" in out(paths.binary("convctl"), "--socket", daemon.socket,
                                          "hello")
    import convd
    assert convd.__version__ == VERSION
    with convd.Client(daemon.socket) as c:
        assert c.hello()["version"] == VERSION


@pytest.mark.skipif(not (paths.LIB / "libconvd-hip.so").exists(),
                    reason="the HIP plugin is not built (make GPU=hip)")
def test_installed_daemon_finds_the_installed_hip_plugin(tmp_path):
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    env = {k: v for k, v in os.environ.items() if k != "CONVD_HIP_PLUGIN"}
    env["OMP_WAIT_POLICY"] = "passive"
    # A models folder that does not exist: convd stops right after the
    # device check, also on a machine with a GPU.
    cmd = [str(prefix / "bin/convd"), "--device", "hip", "--socket", str(tmp_path / "s.sock"),
           "--models", str(tmp_path / "none")]
    trace = shutil.which("strace") is not None
    if trace:
        cmd = ["strace", "-f", "-e", "trace=openat"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0
    # The plugin was loaded (here, with no GPU, its probe answers), from lib/convd/.
    assert "cannot load" not in r.stderr, r.stderr[-2000:]
    if trace:
        assert f'"{prefix}/bin/../lib/convd/libconvd-hip.so"' in r.stderr, r.stderr[-2000:]
