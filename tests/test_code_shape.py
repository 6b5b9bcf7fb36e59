"""The shape of the product code: no C file over 800 lines and no function
over 120 lines in daemon/, runtime/, backends/, kernels/, sparse/, proto/, client/,
tools/ and core/, so that each file keeps one job and each function can be
read at once.

A file may go over either limit when it says why, in a comment of its own:

    // long: <the reason>

anywhere in the file (for a function, best right above it). The reason is
shown by this test; a marker without a reason does not count.

ALLOWED may name a file that is over a limit for a while without a marker
(while another change splits it); it is empty today.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("daemon", "runtime", "backends", "kernels", "sparse", "proto", "client", "tools", "core")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
MARKER = re.compile(r"//\s*long:\s*\S")

ALLOWED = set()  # files over a limit without a marker: none


def product_files():
    out = []
    for top in PRODUCT:
        base = ROOT / top
        if base.is_dir():
            out += sorted(p for p in base.rglob("*") if p.suffix in (".c", ".h", ".hip", ".cpp"))
    return out


def _strip(text):
    """Blanks comments, strings and character literals (keeping newlines),
    so that braces inside them are not counted."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, line count) of every function body at file scope:
    a top-level `{` whose preceding code ends with `)` (after any attribute),
    excluding struct/enum/union/array initialisers."""
    s = _strip(text)
    found, depth, i = [], 0, 0
    start = None
    while i < len(s):
        c = s[i]
        if c == "{":
            if depth == 0:
                h0 = max(0, i - 400)
                head = s[h0:i].rstrip()
                m = re.search(r"(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?$", head)
                if m and not re.search(r"(=|\bstruct|\benum|\bunion)\s*$", head) \
                        and m.group(1) not in ("if", "for", "while", "switch"):
                    start = (m.group(1), s.count("\n", 0, h0 + m.start(1)) + 1)
                else:
                    start = None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start:
                end = s.count("\n", 0, i) + 1
                found.append((start[0], start[1], end - start[1] + 1))
                start = None
        i += 1
    return found


def _offences():
    files, funcs = [], []
    for p in product_files():
        rel = p.relative_to(ROOT).as_posix()
        text = p.read_text(errors="replace")
        if rel in ALLOWED or MARKER.search(text):
            continue
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            files.append(f"{rel}: {lines} lines")
        for name, line, count in functions(text):
            if count > MAX_FUNCTION_LINES:
                funcs.append(f"{rel}:{line}: {name}() is {count} lines")
    return files, funcs


def test_counter_sees_functions():
    text = ("static int f(int a) {\n    if (a) {\n        return '}';\n    }\n"
            "    return 0; // }\n}\nstatic const int t[] = {\n1,\n};\n"
            "struct s { int x; };\nvoid g(void)\n{\n}\n")
    assert functions(text) == [("f", 1, 6), ("g", 11, 3)]


def test_no_file_over_800_lines():
    files, _ = _offences()
    assert not files, "split these files along their jobs, or say why with `// long: <reason>`:\n" + \
        "\n".join(files)


def test_no_function_over_120_lines():
    _, funcs = _offences()
    assert not funcs, "split these functions, or say why with `// long: <reason>`:\n" + "\n".join(funcs)


def test_allowed_files_exist():
    # An entry for a file that is gone (split, renamed) is stale: remove it.
    stale = [rel for rel in sorted(ALLOWED) if not (ROOT / rel).exists()]
    assert not stale, "no longer exist, remove them from ALLOWED: " + ", ".join(stale)


def test_sources_are_clang_formatted():
    """Every C, C++ and HIP source is as .clang-format writes it."""
    import shutil
    import subprocess
    exe = shutil.which("clang-format")
    if not exe:
        pytest.skip("clang-format is not installed (scripts/setup installs it)")
    files = subprocess.run(["git", "ls-files", "*.c", "*.h", "*.cpp", "*.hip"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    out = subprocess.run([exe, "--dry-run", *files], cwd=ROOT, capture_output=True, text=True)
    bad = sorted({line.split(":", 1)[0] for line in out.stderr.splitlines() if "warning:" in line})
    assert not bad, "run clang-format -i on: " + " ".join(bad)
