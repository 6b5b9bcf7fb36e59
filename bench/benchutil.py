"""Helpers the serving benchmarks share (bench/batching.py, bench/overhead.py):
run one of convd's bench binaries and take its JSON report.

    out = run_json([paths.binary("convbench"), "--json", ...], "convbench")
"""
import json
import subprocess
import sys


def run_json(cmd, what):
    """Runs cmd (a list; items are made strings) and returns its stdout parsed
    as JSON; exits the benchmark with `what` and the stderr when cmd fails."""
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)
