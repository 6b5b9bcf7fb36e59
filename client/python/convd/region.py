"""Shared-memory regions of the Python client (docs/PROTOCOL.md,
"Shared-memory regions").

    from convd import Client, Region

    with Client() as c, Region(64 << 20) as r:
        c.register_region(r, "frames")          # the memfd goes over once
        x = r.array((1, 3, 512, 1024), "f32")    # a numpy view of the region
        y = r.array((1, 21, 512, 1024), "f32", offset=x.nbytes)
        x[:] = frame
        c.infer("seg", {"input": x}, into={"logits": y})  # no tensor bytes on the socket
        # y now holds the logits, written by the daemon

An input that is a view of a registered region travels as its place in it;
an output named in `into` is computed straight into its view.
"""
from __future__ import annotations

import fcntl
import mmap
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class Region:
    """A memfd of `size` bytes sealed against shrinking and growing, mapped
    here. Register it on a Client to use it in requests."""

    def __init__(self, size: int, label: str = "convd-region") -> None:
        if size <= 0:
            raise ValueError("a region needs at least one byte")
        self.size = int(size)
        self.fd = os.memfd_create(label, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, self.size)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, SEALS)
            self.mmap = mmap.mmap(self.fd, self.size)
        except BaseException:
            os.close(self.fd)
            raise
        self.bytes = np.frombuffer(self.mmap, np.uint8)  # every view's base
        self._base = self.bytes.__array_interface__["data"][0]

    def array(self, shape: Tuple[int, ...], dtype: Any = "f32", offset: int = 0) -> np.ndarray:
        """A numpy array of `shape` viewing the region from `offset`."""
        from . import _DTYPES
        dt = _DTYPES.get(dtype) if isinstance(dtype, str) else np.dtype(dtype)
        if dt is None:
            raise ValueError(f"unknown dtype {dtype!r} (one of {', '.join(sorted(_DTYPES))})")
        n = int(np.prod(shape)) * dt.itemsize
        if offset < 0 or offset + n > self.size:
            raise ValueError(f"[{offset}, +{n}) is past the end of the region ({self.size} bytes)")
        return self.bytes[offset:offset + n].view(dt).reshape(shape)

    def locate(self, a: np.ndarray) -> Optional[int]:
        """The offset of a C-contiguous view of this region, else None."""
        if self.mmap is None or not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
            return None  # closed, or not a plain view
        addr = a.__array_interface__["data"][0]
        if self._base <= addr and addr + a.nbytes <= self._base + self.size:
            return addr - self._base
        return None

    def close(self) -> None:
        """Closes the descriptor, and the mapping once no view of it remains."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.bytes = None
        if self.mmap is not None:
            try:
                self.mmap.close()
            except BufferError:
                pass  # views remain: the mapping goes with the last of them
            self.mmap = None

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False


def find(regions: Dict[str, Region], a: Any) -> Optional[Tuple[str, int]]:
    """(name, offset) of the registered region that array a views, else None."""
    if not isinstance(a, np.ndarray):
        return None
    for name, r in regions.items():
        off = r.locate(a)
        if off is not None:
            return name, off
    return None
