#!/usr/bin/env python3
"""Writes the example models of README command 1 into a folder (default
build/example-models): a MobileNetV2-shaped and a small ResNet-50-shaped
model with random weights. Models are generated, never committed."""
import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.models import builders  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir", nargs="?", default=str(ROOT / "build" / "example-models"))
    args = ap.parse_args()
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    made = {
        "mobilenetv2": lambda: builders.mobilenetv2(rng, size=224),
        "resnet50-small": lambda: builders.resnet50(rng, size=112, width=0.5),
    }
    for name, build in made.items():
        path = out / f"{name}.onnx"
        if not path.exists():
            builders.save(build(), path)
        print(f"example model: {path}")


if __name__ == "__main__":
    main()
