#!/usr/bin/env python3
"""Interpolation points for Winograd F(4x4,3x3), chosen by float32 error
(docs/PERFORMANCE.md, "F(4x4,3x3)'s points"; backends/cpu/winograd-impl.h).

For every set of 0 and four non-zero points (and infinity) from the list
below, the transforms BT, G, AT are built exactly (Toom-Cook: G and AT from
the Vandermonde rows of the points, BT the inverse-transpose of the square
one; each BT row scaled so its smallest coefficient is 1, the inverse scale
into G), then a 64 -> 32 channel 3x3 layer is computed on random 6x6 tiles as
the C code does (BT and AT in float32, G in double then float32, products
and the sum over channels in float32) and compared with the float64 direct
result. Prints the best sets, the error relative to a float32 direct conv.

    bench/winograd-points.py [--top 12] [--tiles 120]
"""
import argparse
import itertools
from fractions import Fraction as F

import numpy as np


def mats(pts, m, r):
    n = m + r - 1

    def vander(k):  # n x k: the points' rows, then infinity's
        rows = [[F(a) ** j for j in range(k)] for a in pts]
        return rows + [[F(0)] * (k - 1) + [F(1)]]

    v = vander(n)
    a = [row[:] + [F(int(i == j)) for j in range(n)] for i, row in enumerate(v)]
    for c in range(n):  # exact Gauss-Jordan
        p = next(i for i in range(c, n) if a[i][c] != 0)
        a[c], a[p] = a[p], a[c]
        a[c] = [x / a[c][c] for x in a[c]]
        for i in range(n):
            if i != c and a[i][c] != 0:
                f = a[i][c]
                a[i] = [x - f * y for x, y in zip(a[i], a[c])]
    bt = [[a[j][n + i] for j in range(n)] for i in range(n)]  # V^-T
    g = vander(r)
    at = [[vander(m)[j][i] for j in range(n)] for i in range(m)]
    for i in range(n):
        s = 1 / min(abs(x) for x in bt[i] if x != 0)
        bt[i] = [x * s for x in bt[i]]
        g[i] = [x / s for x in g[i]]
    return [np.array(x, dtype=np.float64) for x in (bt, g, at)]


def error(pts, m=4, r=3, c=64, k=32, tiles=120, seed=0):
    bt, g, at = mats(pts, m, r)
    n = m + r - 1
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((tiles, c, n, n))
    w = rng.standard_normal((k, c, r, r)) / np.sqrt(c * r * r)
    f32 = np.float32
    u = np.einsum("ij,kcjl,ml->kcim", g, w, g).astype(f32)
    b32, a32 = bt.astype(f32), at.astype(f32)
    v = np.einsum("ij,tcjl,ml->tcim", b32, d.astype(f32), b32).astype(f32)
    y = np.einsum("ij,tkjl,ml->tkim", a32, np.einsum("kcim,tcim->tkim", u, v).astype(f32), a32).astype(f32)
    ref = np.zeros((tiles, k, m, m))
    direct = np.zeros((tiles, k, m, m), f32)
    for oy in range(m):
        for ox in range(m):
            ref[:, :, oy, ox] = np.einsum("tcij,kcij->tk", d[:, :, oy:oy + r, ox:ox + r], w)
            direct[:, :, oy, ox] = np.einsum("tcij,kcij->tk", d[:, :, oy:oy + r, ox:ox + r].astype(f32), w.astype(f32))
    rel = lambda x: np.linalg.norm(x - ref) / np.linalg.norm(ref)
    return rel(y) / rel(direct)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--tiles", type=int, default=120)
    a = ap.parse_args()
    base = [F(1), F(2), F(3), F(4), F(1, 2), F(1, 3), F(1, 4), F(3, 2), F(2, 3)]
    cands = [s * x for x in base for s in (1, -1)]
    print(f"Lavin's 0, 1, -1, 2, -2: {error([0, 1, -1, 2, -2], tiles=a.tiles):.2f}x direct's f32 error")
    res = sorted((error([F(0), *c], tiles=a.tiles), c) for c in itertools.combinations(cands, 4))
    for e, c in res[:a.top]:
        print(f"{e:.2f}x  0, " + ", ".join(str(p) for p in c))


if __name__ == "__main__":
    main()
