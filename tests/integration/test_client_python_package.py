"""The Python client as a package: `pip install ./client/python` into a fresh,
plain venv (no system site-packages: numpy and msgpack come from pip, through
its cache after the first run), then an inference against a test daemon from
that venv's Python, importing the installed copy, not the source tree."""
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from tests.integration.client_models import write_scale2
from tests.support import paths
from tests.support.daemon import TestDaemon

VERSION = (paths.ROOT / "VERSION").read_text().strip()
PKG = paths.ROOT / "client" / "python"


def index_url(py, env):
    """The index pip would use: PIP_INDEX_URL, pip's configuration, or PyPI."""
    if env.get("PIP_INDEX_URL"):
        return env["PIP_INDEX_URL"]
    r = subprocess.run([str(py), "-m", "pip", "config", "get", "global.index-url"],
                       capture_output=True, text=True, env=env, timeout=60)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "https://pypi.org/simple"


def index_unreachable(url):
    """Why the index cannot be reached, or None when it answers for msgpack.
    Asked before pip runs: pip says "No matching distribution found" both
    offline and for a misspelled or unsatisfiable requirement, so its
    message cannot tell a packaging bug from a missing network."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/msgpack/", timeout=20) as r:
            r.read(1)
    except (OSError, ValueError) as e:  # URLError, timeouts, refused, bad URL
        return f"{url}: {e}"
    return None

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import convd, convd.aio
    x = np.arange(2 * 3 * 5 * 7, dtype=np.float32).reshape(2, 3, 5, 7) - 100
    with convd.Client(sys.argv[1]) as c:
        y = c.infer("scale2", {"x": x})["y"]
        hello = c.hello()
    assert np.array_equal(y, np.maximum(0, 2 * x)), y
    print(convd.__file__)
    print(convd.__version__, hello["version"])
""")


def test_pip_installs_the_client_into_a_fresh_venv_and_it_infers(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    # Nothing of this interpreter's site-packages is visible in the venv.
    probe = subprocess.run([str(py), "-c", "import numpy"], capture_output=True)
    assert probe.returncode != 0, "the venv sees numpy before pip installed it"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    url = index_url(py, env)
    why = index_unreachable(url)
    if why:
        pytest.skip("the package index for numpy/msgpack is unreachable: " + why)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", str(PKG)], capture_output=True,
                       text=True, timeout=900, env=env, cwd=tmp_path)
    # pip builds in the source folder: leave nothing behind in the tree.
    shutil.rmtree(PKG / "build", ignore_errors=True)
    shutil.rmtree(PKG / "convd.egg-info", ignore_errors=True)
    # The index answered above: any failure now is the package's.
    assert r.returncode == 0, r.stdout + r.stderr
    site = subprocess.run([str(py), "-c", "import convd, os; print(os.path.dirname(convd.__file__))"],
                          capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    pkg_dir = site.stdout.strip()
    assert pkg_dir.startswith(str(venv)), pkg_dir
    # Typed, and its version the project's (a file, not a link, once installed).
    assert os.path.exists(os.path.join(pkg_dir, "py.typed"))
    assert not os.path.islink(os.path.join(pkg_dir, "VERSION"))
    meta = subprocess.run([str(py), "-m", "pip", "show", "convd"], capture_output=True, text=True,
                          env=env, cwd=tmp_path).stdout
    assert f"Version: {VERSION}" in meta
    assert sorted(l.split(":", 1)[1].replace(" ", "").split(",")
                  for l in meta.splitlines() if l.startswith("Requires:"))[0] == \
        ["msgpack", "numpy"]

    models = tmp_path / "models"
    models.mkdir()
    write_scale2(models / "scale2.onnx")
    script = tmp_path / "infer.py"
    script.write_text(SCRIPT)
    with TestDaemon(models_dir=models) as d:
        r = subprocess.run([str(py), str(script), d.socket], capture_output=True, text=True,
                           timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    where, versions = r.stdout.splitlines()
    assert where.startswith(str(venv)), where
    assert versions.split() == [VERSION, VERSION]
