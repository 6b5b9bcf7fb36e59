"""The one direction of calls (scripts/check-deps.py): no include goes
upward, the check catches one that does, and docs/ARCHITECTURE.md shows the
table the check enforces."""
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check-deps.py")


def _load():
    spec = importlib.util.spec_from_file_location("check_deps", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_include_goes_upward():
    r = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_upward_include_is_reported(tmp_path):
    deps = _load()
    for path, text in {
        "core/errors.h": "",
        "runtime/runtime.h": '#include "core/errors.h"\n',
        "sparse/csr.h": '#include "core/errors.h"\n#include "runtime/runtime.h"\n',
        "backends/cpu/a.c": '#include "backends/hip/b.h"\n',
        "backends/hip/b.h": "",
    }.items():
        p = tmp_path / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    bad = [b for b in deps.check(str(tmp_path)) if "stale exception" not in b]
    assert len(bad) == 2, bad
    assert bad[0].startswith("backends/cpu/a.c:1: backends/cpu may not include backends/hip/b.h")
    assert bad[1].startswith("sparse/csr.h:2: sparse may not include runtime/runtime.h")


def test_the_architecture_page_shows_the_table():
    deps = _load()
    doc = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    assert deps.table() in doc, "docs/ARCHITECTURE.md: paste the output of scripts/check-deps.py --table"


def _tree(tmp_path, files):
    for path, text in files.items():
        p = tmp_path / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_a_daemon_include_circle_is_reported(tmp_path):
    # methods.c calls into the connection and the connection calls the
    # dispatcher by name: the circle the daemon had (issue 23).
    deps = _load()
    _tree(tmp_path, {
        "daemon/conn.h": '#include "daemon/request.h"\n',
        "daemon/conn.c": '#include "daemon/conn.h"\n#include "daemon/methods.h"\n',
        "daemon/methods.h": "",
        "daemon/methods.c": '#include "daemon/methods.h"\n#include "daemon/conn.h"\n',
        "daemon/request.h": "",
    })
    loops = deps.circles(str(tmp_path))
    assert len(loops) == 1, loops
    assert "daemon/conn, daemon/methods" in loops[0]
    assert "daemon/methods -> daemon/conn" in loops[0]


def test_the_connection_may_go_round_its_own_files(tmp_path):
    deps = _load()
    _tree(tmp_path, {
        "daemon/conn.h": '#include "daemon/request.h"\n',
        "daemon/conn.c": '#include "daemon/conn-internal.h"\n',
        "daemon/conn-internal.h": '#include "daemon/conn.h"\n',
        "daemon/conn-respond.c": '#include "daemon/conn-internal.h"\n',
        "daemon/request.h": "",
        "daemon/server.c": '#include "daemon/conn.h"\n',
    })
    assert deps.circles(str(tmp_path)) == []


def test_a_longer_circle_through_one_connection_file_is_reported(tmp_path):
    # conn <-> conn-internal is allowed, but not a third file in the loop.
    deps = _load()
    _tree(tmp_path, {
        "daemon/conn.c": '#include "daemon/conn-internal.h"\n#include "daemon/server.h"\n',
        "daemon/conn-internal.h": '#include "daemon/conn.h"\n',
        "daemon/conn.h": "",
        "daemon/server.h": "",
        "daemon/server.c": '#include "daemon/conn.h"\n',
    })
    loops = deps.circles(str(tmp_path))
    assert len(loops) == 1 and "daemon/server" in loops[0], loops
