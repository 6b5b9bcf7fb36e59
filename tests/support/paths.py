"""Where the build outputs live (CONVD_BUILD selects build/ or build-san/)."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / os.environ.get("CONVD_BUILD", "build")
BIN = BUILD / "bin"
LIB = BUILD / "lib"


def binary(name):
    path = BIN / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run make first")
    return str(path)
