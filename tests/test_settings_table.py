"""The settings table is data (daemon/settings.toml) made C by
scripts/gen-settings-table.py at build time: the checked-in data generates,
and the generator refuses bad data with a line that names the setting,
writing nothing, so a mistake stops the build instead of reaching --help,
the config file and the docs."""
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GEN = ROOT / "scripts" / "gen-settings-table.py"
DATA = ROOT / "daemon" / "settings.toml"

# A small valid file: one row of each kind the checks treat differently.
GOOD = """
[choices]
off_on = ["off", "on"]

[[setting]]
name = "workers"
type = "INT"
min = 1
max = 256
default = "2"
arg = "N"
field = "workers"
help = "worker threads"

[[setting]]
name = "tune"
type = "ENUM"
default = "off"
arg = "off|on"
field = "tune"
choices = "off_on"
help = "time the kernels"

[[setting]]
name = "help"
type = "ACTION"
flags = ["CLI_ONLY", "NO_STATS"]
help = "print this help and exit"
"""


def generate(tmp_path, text):
    src, out = tmp_path / "settings.toml", tmp_path / "settings-table.c"
    src.write_text(text)
    r = subprocess.run([sys.executable, str(GEN), str(src), str(out)], capture_output=True, text=True,
                       timeout=30)
    return r, out


def test_the_checked_in_data_generates(tmp_path):
    out = tmp_path / "settings-table.c"
    r = subprocess.run([sys.executable, str(GEN), str(DATA), str(out)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    c = out.read_text()
    assert c.startswith("// Generated from ") and "do not edit" in c.splitlines()[0]
    for row in tomllib.loads(DATA.read_text())["setting"]:
        assert f'.name = "{row["name"]}"' in c
    assert "const char *const cd_max_isa_names[]" in c and "static const char *const cd_max_isa_names" not in c
    cc = shutil.which("cc")
    if cc:  # the _Static_asserts: what only the compiler can check
        r = subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-I", str(ROOT), "-Wall", "-Wextra", "-Werror",
                            "-fsyntax-only", str(out)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr


def test_the_small_file_generates(tmp_path):
    r, out = generate(tmp_path, GOOD)
    assert r.returncode == 0, r.stderr
    assert ".choices = off_on" in out.read_text()


@pytest.mark.parametrize("old,new,message", [
    ('name = "tune"', 'name = "workers"', "setting 'workers': the name is used twice"),
    ('choices = "off_on"\n', "", "setting 'tune': missing 'choices'"),
    ('field = "workers"', 'field = "workers"\nunit = "threads"', "setting 'workers': unknown key 'unit'"),
    ('type = "INT"', 'type = "COUNT"', "setting 'workers': type 'COUNT' is not one of"),
    ('["CLI_ONLY", "NO_STATS"]', '["CLI_ONLY", "HIDDEN"]', "setting 'help': flags"),
    ('default = "off"', 'default = "maybe"', "setting 'tune': default 'maybe' is not one of off_on"),
    ('choices = "off_on"', 'choices = "yes_no"', "setting 'tune': choices 'yes_no' is not a list"),
    ("min = 1\n", "min = 300\n", "setting 'workers': min 300 is greater than max 256"),
    ('default = "2"', 'default = "512"', "setting 'workers': default \"512\" is outside min..max"),
    ("max = 256", 'max = "lots"', "setting 'workers': max = \"lots\": not a byte count"),
    ('help = "worker threads"\n', "", "setting 'workers': missing 'help'"),
    ('flags = ["CLI_ONLY", "NO_STATS"]', 'arg = "X"', "setting 'help': 'arg' not used by ACTION rows"),
    # Per-model keys: numbers and texts only, a key name, never twice, never command-line only.
    ('choices = "off_on"\n', 'choices = "off_on"\nmodel_key = "tune"\n', "setting 'tune': 'model_key' not used by ENUM"),
    ('field = "workers"', 'field = "workers"\nmodel_key = "Workers"', "setting 'workers': model_key 'Workers' is not"),
    ('field = "workers"', 'field = "workers"\ncheck = "cd_check"', "setting 'workers': 'check' not used by INT"),
    ('field = "workers"', 'field = "workers"\nmodel_key = "w"\nflags = ["CLI_ONLY"]',
     "setting 'workers': a model_key row cannot be CLI_ONLY"),
])
def test_bad_data_is_refused_naming_the_setting(tmp_path, old, new, message):
    assert old in GOOD
    r, out = generate(tmp_path, GOOD.replace(old, new, 1))
    assert r.returncode == 1
    assert message in r.stderr, r.stderr
    assert not out.exists(), "nothing is written for bad data"


def test_a_model_key_used_twice_is_refused(tmp_path):
    two = GOOD.replace('field = "workers"', 'field = "workers"\nmodel_key = "w"', 1)
    two += two[two.index("[[setting]]"):two.index("[[setting]]", two.index("[[setting]]") + 1)].replace(
        'name = "workers"', 'name = "threads"')
    r, out = generate(tmp_path, two)
    assert r.returncode == 1 and "model_key 'w' is used twice" in r.stderr, r.stderr


def test_a_model_key_row_is_generated_with_its_conf_field(tmp_path):
    r, out = generate(tmp_path, GOOD.replace('field = "workers"', 'field = "workers"\nmodel_key = "workers"', 1))
    assert r.returncode == 0, r.stderr
    c = out.read_text()
    assert '.model_key = "workers"' in c and "offsetof(cd_model_conf, workers)" in c
    assert "cd_model_conf.workers differs from the setting" in c  # the compiler checks the two fields agree


def test_an_unparsable_file_is_refused(tmp_path):
    r, out = generate(tmp_path, GOOD + "\n[[setting]\n")
    assert r.returncode == 1 and "settings.toml" in r.stderr and not out.exists()


def test_check_deps_sees_the_includes_of_the_data(tmp_path):
    # The generated C includes what `includes` names: the layers apply to it.
    spec = importlib.util.spec_from_file_location("check_deps", ROOT / "scripts" / "check-deps.py")
    deps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(deps)
    for path, text in {"client/convd.h": "", "core/limits.h": "",
                       "daemon/settings.toml": 'includes = ["core/limits.h", "client/convd.h"]\n'}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    bad = deps.check(str(tmp_path))
    assert len(bad) == 1, bad
    assert bad[0].startswith("daemon/settings.toml:1: daemon may not include client/convd.h (client); "), bad
