"""libconvd.so as an application links it: only client/convd.h, only the
public convd_* symbols exported, and it talks to a real daemon."""
import os
import subprocess

from tests.support import paths

# A sanitizer build's library needs the sanitizer runtimes in the application.
SAN_FLAGS = ["-fsanitize=address,undefined"] if os.environ.get("CONVD_BUILD") == "build-san" else []

APP = r"""
#include "client/convd.h"
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    convd_conn *c = NULL;
    if (convd_connect("/nonexistent/convd.sock", NULL, &c) != CONVD_ECONNECT) return 10;
    if (convd_connect(argv[1], NULL, &c) != 0) return 11;
    convd_hello_info h;
    if (convd_hello(c, &h) != 0) return 12;
    printf("%s\n", h.server);
    convd_close(c);
    return 0;
}
"""


def test_shared_library_exports_only_the_public_api():
    out = subprocess.run(["nm", "-D", "--defined-only", str(paths.LIB / "libconvd.so")],
                         capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert names, "no symbols exported"
    assert all(n.startswith("convd_") for n in names), [n for n in names if not n.startswith("convd_")]


def test_application_links_the_shared_library_and_talks_to_convd(daemon, tmp_path):
    src = tmp_path / "app.c"
    src.write_text(APP)
    exe = tmp_path / "app"
    subprocess.run(["cc", "-std=c11", *SAN_FLAGS, "-I", str(paths.ROOT), str(src), "-o", str(exe),
                    "-L", str(paths.LIB), "-lconvd", f"-Wl,-rpath,{paths.LIB}"],
                   check=True, capture_output=True, text=True)
    r = subprocess.run([str(exe), daemon.socket], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.strip() == "convd"
