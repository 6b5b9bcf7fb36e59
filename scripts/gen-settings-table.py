#!/usr/bin/env python3
"""Writes convd's C settings table (cd_setting_table) from its data file,
after checking the data: the daemon's flags, config-file keys, --help and
docs/OPERATIONS.md's table all come from that table, so a mistake here would
reach all of them. daemon/settings.toml says what each key means.

    scripts/gen-settings-table.py daemon/settings.toml build/gen/daemon/settings-table.c

Exits 1 with one line per problem, each naming the setting, and writes
nothing then. Python >= 3.11 (tomllib)."""
import os
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    sys.exit("gen-settings-table.py: needs Python 3.11 or later (tomllib): make PYTHON=python3.11")

# cd_setting_type and CD_SETF_* (daemon/settings.h), without their prefixes.
RANGED = ("STR", "PATH", "INT", "SIZE")
TYPES = RANGED + ("ENUM", "ACTION")
FLAGS = ("CLI_ONLY", "NO_STATS", "RELOAD")

# The keys a row of each type must have, and those it may have.
REQUIRED = {"name", "type", "help"}
VALUED = {"default", "arg", "field"}
OPTIONAL = {"flags", "doc", "doc_default", "check", "model_key"}
KEYS = REQUIRED | VALUED | OPTIONAL | {"min", "max", "choices"}


def required(kind):
    if kind == "ACTION":
        return REQUIRED
    extra = {"min", "max"} if kind in RANGED else {"choices"} if kind == "ENUM" else set()
    return REQUIRED | VALUED | extra


def allowed(kind):
    if kind == "ACTION":
        return required(kind) | {"flags"}
    # A per-model key is a number or a text, like the keys of a .conf file; a
    # check is for text.
    extra = OPTIONAL - ({"check"} if kind != "STR" else set()) - ({"model_key"} if kind not in ("INT", "STR") else set())
    return required(kind) | extra


IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MODEL_KEY = re.compile(r"[a-z][a-z0-9_]*")
MAX_MODEL_KEYS = 64  # daemon/models.c keeps the keys a `load` gave in a 64-bit mask
CONSTANT = re.compile(r"[A-Z_][A-Z0-9_]*")
NAME = re.compile(r"[a-z][a-z0-9-]*")
BYTES = re.compile(r"(\d+)([KMGT])")
SHIFT = {"K": 10, "M": 20, "G": 30, "T": 40}
# A default as cd_settings_set parses it: decimal, SIZE with a K/M/G suffix.
INT_TEXT = re.compile(r"-?\d+")
SIZE_TEXT = re.compile(r"(-?\d+)(?:([KMG])I?B?)?", re.I)
MACRO = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")
TRIGRAPH = re.compile(r"(?<=\?)\?")  # C11 reads ??x as one character


class Bad(Exception):
    pass


def bound(row, key):
    """(C expression, value or None when only the compiler knows it)."""
    v = row[key]
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v), v
    if not isinstance(v, str):
        raise Bad(f"{key} must be an integer or a string, not {v!r}")
    m = BYTES.fullmatch(v)
    if m:
        n, shift = int(m[1]), SHIFT[m[2]]
        return f"(int64_t){n} << {shift}", n << shift
    if v == "FSIZE":
        if row["type"] not in ("STR", "PATH"):
            raise Bad(f'{key} = "FSIZE" is for STR and PATH rows')
        return f"FSIZE({row['field']})", None
    if CONSTANT.fullmatch(v):
        return v, None
    raise Bad(f'{key} = "{v}": not a byte count ("64K"), "FSIZE" or a C constant')


def check_default(row, lo, hi):
    kind, text = row["type"], row["default"]
    if not isinstance(text, str):
        raise Bad("default must be a string (the text a user would give)")
    if kind not in ("INT", "SIZE"):
        return
    m = (INT_TEXT if kind == "INT" else SIZE_TEXT).fullmatch(text)
    if not m:
        raise Bad(f'default "{text}" is not {"an integer" if kind == "INT" else "a byte count"}')
    value = int(m[0]) if kind == "INT" else int(m[1]) << SHIFT.get((m[2] or "").upper(), 0)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise Bad(f'default "{text}" is outside min..max')


def check_row(row, choices):
    """Raises Bad for the first problem of one row; returns its min and max
    as (C expression, value or None), or Nones when the type has none."""
    kind = row.get("type")
    if kind not in TYPES:
        raise Bad(f"type {kind!r} is not one of {' '.join(TYPES)}")
    unknown, unused, missing = set(row) - KEYS, set(row) - allowed(kind), required(kind) - set(row)
    if unknown:
        raise Bad("unknown key " + ", ".join(f"'{k}'" for k in sorted(unknown)))
    if unused:
        raise Bad(" ".join(f"'{k}'" for k in sorted(unused)) + f" not used by {kind} rows")
    if missing:
        raise Bad("missing " + ", ".join(f"'{k}'" for k in sorted(missing)))
    for key in ("help", "arg", "doc", "doc_default"):
        if key in row and (not isinstance(row[key], str) or not row[key]):
            raise Bad(f"{key} must be a non-empty string")
    if "field" in row and not (isinstance(row["field"], str) and IDENT.fullmatch(row["field"])):
        raise Bad(f"field {row['field']!r} is not a C identifier")
    if "check" in row and not (isinstance(row["check"], str) and IDENT.fullmatch(row["check"])):
        raise Bad(f"check {row['check']!r} is not a C function name")
    if "model_key" in row:
        if not (isinstance(row["model_key"], str) and MODEL_KEY.fullmatch(row["model_key"])):
            raise Bad(f"model_key {row['model_key']!r} is not a key name (lower case, digits, '_')")
        if "CLI_ONLY" in row.get("flags", []):
            raise Bad("a model_key row cannot be CLI_ONLY: its value is the models' default")
    flags = row.get("flags", [])
    if not isinstance(flags, list) or any(f not in FLAGS for f in flags) or len(set(flags)) < len(flags):
        raise Bad(f"flags {flags!r}: a list of distinct names of {' '.join(FLAGS)}")
    lo = hi = (None, None)
    if kind == "ENUM":
        if not isinstance(row["choices"], str) or row["choices"] not in choices:
            raise Bad(f"choices {row['choices']!r} is not a list of [choices]")
        if row["default"] not in choices[row["choices"]]:
            raise Bad(f"default {row['default']!r} is not one of {row['choices']}")
        last = len(choices[row["choices"]]) - 1
        lo, hi = ("0", 0), (str(last), last)
    if kind in RANGED:
        lo, hi = bound(row, "min"), bound(row, "max")
        if lo[1] is not None and hi[1] is not None and lo[1] > hi[1]:
            raise Bad(f"min {row['min']} is greater than max {row['max']}")
    if kind != "ACTION":
        check_default(row, lo[1], hi[1])
    return lo, hi


def check(data):
    """The problems of the whole file, one line each."""
    bad = [f"unknown top-level key '{k}'" for k in sorted(set(data) - {"includes", "choices", "setting"})]
    includes = data.get("includes", [])
    if not isinstance(includes, list) or not all(isinstance(i, str) and i.endswith(".h") for i in includes):
        bad.append("includes must be a list of header paths")
    choices = data.get("choices", {})
    if not isinstance(choices, dict):
        bad.append("[choices] must be a table of lists")
        choices = {}
    for name, values in choices.items():
        if not IDENT.fullmatch(name):
            bad.append(f"choices list '{name}' is not a C identifier")
        names = values if isinstance(values, list) else []
        if not names or not all(isinstance(v, str) and v for v in names) or len(set(names)) < len(names):
            bad.append(f"choices list '{name}' must hold distinct non-empty names")
    rows = data.get("setting", [])
    if not rows:
        bad.append("no [[setting]] rows")
    seen, bounds = set(), []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return bad + [f"setting #{i + 1}: not a [[setting]] table"], []
        name = row.get("name")
        if not (isinstance(name, str) and NAME.fullmatch(name)):
            bad.append(f"setting #{i + 1}: name {name!r} is not a flag name (lower case, digits, '-')")
            name = f"#{i + 1}"
        elif name in seen:
            bad.append(f"setting '{name}': the name is used twice")
        seen.add(name)
        try:
            bounds.append(check_row(row, choices))
        except Bad as e:
            bad.append(f"setting '{name}': {e}")
    keys = [row["model_key"] for row in rows if isinstance(row, dict) and isinstance(row.get("model_key"), str)]
    bad += [f"model_key '{k}' is used twice" for k in sorted({k for k in keys if keys.count(k) > 1})]
    if len(keys) > MAX_MODEL_KEYS:
        bad.append(f"{len(keys)} model_key rows: at most {MAX_MODEL_KEYS}")
    used = {row.get("choices") for row in rows if isinstance(row.get("choices"), str)}
    # An unused static list would be a compiler warning; an exported (cd_*) one may serve other code.
    unused = [n for n in choices if n not in used and not n.startswith("cd_")]
    bad += [f"choices list '{n}' is used by no setting" for n in unused]
    return bad, bounds


def c_string(text):
    """A C string literal of text; {NAME} pastes the string macro NAME."""
    def lit(s):
        s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return '"' + TRIGRAPH.sub(r"\\?", s) + '"'

    parts = MACRO.split(text)  # text, macro, text, ...
    out = [lit(p) if i % 2 == 0 else p for i, p in enumerate(parts) if p or i == 0]
    return " ".join(out)


def emit(data, bounds, source):
    choices = data.get("choices", {})
    out = [f"// Generated from {source} by scripts/gen-settings-table.py: do not edit.",
           '#include "daemon/settings.h"', ""]
    out += [f'#include "{h}"' for h in data.get("includes", [])]
    out += ["", "#include <stddef.h>", "#include <stdint.h>", ""]
    for name, values in choices.items():
        storage = "" if name.startswith("cd_") else "static "
        out.append(f"{storage}const char *const {name}[] = {{{', '.join(c_string(v) for v in values)}, NULL}};")
    out += ["", "#define OFF(field) offsetof(cd_settings, field)",
            "#define FSIZE(field) ((int64_t)sizeof(((cd_settings *)0)->field) - 1)", "",
            "const cd_setting_desc cd_setting_table[] = {"]
    asserts = []
    for row, (lo, hi) in zip(data["setting"], bounds):
        kind, field = row["type"], row.get("field")
        flags = " | ".join(f"CD_SETF_{f}" for f in row.get("flags", [])) or "0"
        init = [f".name = {c_string(row['name'])}", f".type = CD_SET_{kind}"]
        if lo[0] is not None:
            init += [f".min = {lo[0]}", f".max = {hi[0]}"]
        if "default" in row:
            init.append(f".def = {c_string(row['default'])}")
        init += [f".flags = {flags}", f".help = {c_string(row['help'])}"]
        if field:
            init += [f".arg = {c_string(row['arg'])}", f".offset = OFF({field})"]
        if kind == "ENUM":
            init.append(f".choices = {row['choices']}")
        init += [f".{k} = {c_string(row[k])}" for k in ("doc", "doc_default") if k in row]
        if "check" in row:
            init.append(f".check = {row['check']}")
        if "model_key" in row:
            init += [f".model_key = {c_string(row['model_key'])}", f".model_offset = offsetof(cd_model_conf, {field})"]
        out.append("    {" + ",\n     ".join(init) + "},")
        asserts += static_checks(row, lo, hi)
    out += ["};", "const size_t cd_setting_count = sizeof cd_setting_table / sizeof cd_setting_table[0];", "",
            "// What the generator could not check, for the compiler to."]
    return "\n".join(out + asserts) + "\n"


def static_checks(row, lo, hi):
    """_Static_asserts of a row: symbolic bounds in order, the field wide
    enough for what cd_settings_set writes into it."""
    kind, name, field = row["type"], row["name"], row.get("field")
    out = []
    if kind in RANGED and None in (lo[1], hi[1]):
        out.append(f'_Static_assert({lo[0]} <= {hi[0]}, "{name}: min is greater than max");')
    size = f"sizeof(((cd_settings *)0)->{field})"
    if kind in ("STR", "PATH") and row["max"] != "FSIZE":
        out.append(f'_Static_assert({hi[0]} < {size}, "{name}: max is longer than the field");')
    if kind in ("INT", "SIZE", "ENUM"):
        out.append(f'_Static_assert({size} == sizeof(int64_t), "{name}: the field is not an int64_t");')
    if "model_key" in row:  # cd_model_conf's field holds what the setting's does
        conf = f"sizeof(((cd_model_conf *)0)->{field})"
        out.append(f'_Static_assert({conf} == {size}, "{name}: cd_model_conf.{field} differs from the setting");')
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, target = argv[1], argv[2]
    try:
        with open(source, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        print(f"{source}: {e}", file=sys.stderr)
        return 1
    bad, bounds = check(data)
    for b in bad:
        print(f"{source}: {b}", file=sys.stderr)
    if bad:
        return 1
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with open(target + ".tmp", "w", encoding="utf-8") as f:
        f.write(emit(data, bounds, source))
    os.replace(target + ".tmp", target)  # make never sees half a file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
