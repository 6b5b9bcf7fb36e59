"""Big tensors on the wire without extra copies (issue 23): a request goes out
as its packed header pieces and the numpy arrays' own buffers (one sendmsg),
and an answer's big bin payloads are read with recv_into straight into
buffers of their own, which the outputs then are views of.

    pieces = pack_pieces([0, msgid, "infer", [params]])  # params may hold Raw
    send_pieces(sock, pieces)
    msg = MessageReader().read(sock)   # big bins come back as numpy uint8 arrays
"""
from __future__ import annotations

import socket
import struct
import sys
from typing import Any, Callable, List, Optional, Union

import msgpack
import numpy as np

# A bin payload of at least this many bytes is sent from, or received into,
# a buffer of its own; smaller ones are packed and read with the rest.
BIG = 64 << 10

# Buffers of big payloads a reader keeps for reuse (their pages stay mapped:
# a fresh 42 MiB buffer costs its page faults again at every answer).
_SPARE = 2

# The ext type that stands for a big payload in the header bytes handed to
# msgpack (the daemon sends no ext types).
_EXT_BIG = 0x55

Piece = Union[bytes, memoryview]


class Raw:
    """A bin payload to send from where it lies (a C-contiguous buffer)."""
    __slots__ = ("view",)

    def __init__(self, buf: Any) -> None:
        self.view = memoryview(buf).cast("B")


def _bin_header(n: int) -> bytes:
    if n < 1 << 8:
        return struct.pack(">BB", 0xC4, n)
    if n < 1 << 16:
        return struct.pack(">BH", 0xC5, n)
    return struct.pack(">BI", 0xC6, n)


def pack_pieces(obj: Any) -> List[Piece]:
    """obj packed as msgpack (bin type for bytes), as pieces: the header bytes
    joined, and each Raw payload of BIG bytes or more as its own memoryview."""
    pk = msgpack.Packer(use_bin_type=True, autoreset=False)
    pieces: List[Piece] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            pk.pack_map_header(len(o))
            for k, v in o.items():
                pk.pack(k)
                walk(v)
        elif isinstance(o, (list, tuple)):
            pk.pack_array_header(len(o))
            for v in o:
                walk(v)
        elif isinstance(o, Raw):
            n = o.view.nbytes
            if n < BIG:
                pk.pack(o.view.tobytes())
                return
            pieces.append(pk.bytes() + _bin_header(n))
            pk.reset()
            pieces.append(o.view)
        else:
            pk.pack(o)

    walk(obj)
    pieces.append(pk.bytes())
    return [p for p in pieces if len(p)]


def send_pieces(sock: socket.socket, pieces: List[Piece]) -> None:
    """Sends every piece in order: sendmsg of all of them, then the rest of
    what it did not take (a socket timeout raises socket.timeout)."""
    views = [memoryview(p).cast("B") for p in pieces]
    while views:
        n = sock.sendmsg(views[:64])  # IOV_MAX is 1024; a request has few pieces
        while views and n >= views[0].nbytes:
            n -= views[0].nbytes
            views.pop(0)
        if views and n:
            views[0] = views[0][n:]


class ProtocolError(Exception):
    """Bytes that are not msgpack: the stream cannot be read further."""


# Headers of a fixed size with no payload, by first byte: their size.
_FIXED = {0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9,
          0xD4: 3, 0xD5: 4, 0xD6: 6, 0xD7: 10, 0xD8: 18}
# Headers with a length field, by first byte: (its bytes, kind): b bin, e ext,
# s str, a array, m map.
_SIZED = {0xC4: (1, "b"), 0xC5: (2, "b"), 0xC6: (4, "b"), 0xC7: (1, "e"), 0xC8: (2, "e"), 0xC9: (4, "e"),
          0xD9: (1, "s"), 0xDA: (2, "s"), 0xDB: (4, "s"), 0xDC: (2, "a"), 0xDD: (4, "a"), 0xDE: (2, "m"),
          0xDF: (4, "m")}


def _header(buf: bytearray, pos: int, end: int):
    """(header size, children, payload size, is_bin) of the msgpack header at
    buf[pos], or None when it is not all in buf[:end]. Children count map
    keys and values apart."""
    b = buf[pos]
    if b <= 0x7F or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):
        return 1, 0, 0, False
    if b <= 0x8F:
        return 1, 2 * (b & 0x0F), 0, False
    if b <= 0x9F:
        return 1, b & 0x0F, 0, False
    if b <= 0xBF:
        return 1, 0, b & 0x1F, False
    fixed = _FIXED.get(b)
    if fixed:
        return fixed, 0, 0, False
    if b not in _SIZED:
        raise ProtocolError(f"byte 0x{b:02x} is not valid msgpack")
    nlen, kind = _SIZED[b]
    hsize = 1 + nlen + (1 if kind == "e" else 0)
    if pos + hsize > end:
        return None
    n = int.from_bytes(buf[pos + 1:pos + 1 + nlen], "big")
    if kind == "a":
        return hsize, n, 0, False
    if kind == "m":
        return hsize, 2 * n, 0, False
    return hsize, 0, n, kind == "b"


class MessageReader:
    """Reads whole msgpack messages from a stream socket. A bin payload of BIG
    bytes or more is read (recv_into) straight into a numpy uint8 array of its
    own and comes back as that array; everything else is decoded by msgpack
    from the header bytes. max_message bounds one message."""

    def __init__(self, max_message: int = 1 << 30, chunk: int = 1 << 18) -> None:
        self.max_message = max_message
        self._buf = bytearray(chunk)
        self._lo = 0  # first byte not yet returned
        self._hi = 0  # one past the last byte received
        # A read stopped (timeout, error) after part of a message was taken
        # from the buffer (a big payload): the stream is out of step. Until
        # then a read that stopped can simply be tried again.
        self.partial = False
        self._spare: List[np.ndarray] = []  # buffers of earlier big payloads

    def _payload_buffer(self, n: int) -> np.ndarray:
        """n bytes to receive a big payload into: a kept buffer that nothing
        outside the reader refers to any more (every output array is a view
        holding a reference to it, so its reference count says so), else a
        new one, kept for later."""
        for i in range(len(self._spare)):
            # 2: the list's reference and getrefcount's argument
            if sys.getrefcount(self._spare[i]) == 2 and n <= self._spare[i].size <= 2 * n:
                return self._spare[i][:n]
        buf = np.empty(n, np.uint8)
        free = [i for i in range(len(self._spare)) if sys.getrefcount(self._spare[i]) == 2]
        if len(self._spare) < _SPARE:
            self._spare.append(buf)
        elif free:
            self._spare[free[0]] = buf
        return buf

    def _recv(self, sock: socket.socket) -> None:
        """Receives more bytes at _hi (compacting or growing the buffer first
        when it is full); EOF raises ConnectionError."""
        if self._hi == len(self._buf):
            if self._lo > 0:
                n = self._hi - self._lo
                self._buf[:n] = self._buf[self._lo:self._hi]
                self._lo, self._hi = 0, n
            else:
                self._buf.extend(bytes(len(self._buf)))
        got = sock.recv_into(memoryview(self._buf)[self._hi:])
        if not got:
            raise ConnectionError("connection closed by the daemon")
        self._hi += got

    def read(self, sock: socket.socket, on_recv: Optional[Callable[[], None]] = None) -> Any:
        """The next message (socket.timeout and OSError pass through;
        ProtocolError on bad bytes). on_recv runs before each blocking recv
        (to set the socket's timeout)."""
        pieces: List[Any] = []  # header bytes before the current segment
        bigs: List[np.ndarray] = []
        left = 1  # values still to read
        pos = 0  # offset from _lo of the next header
        size = 0  # bytes of the message consumed before _lo's segment

        def more() -> None:
            nonlocal pos
            base = self._lo
            if on_recv:
                on_recv()
            self._recv(sock)
            pos += base - self._lo  # _recv may have moved the bytes to 0

        while left:
            if self._lo + pos >= self._hi:
                more()
                continue
            h = _header(self._buf, self._lo + pos, self._hi)
            if h is None:
                more()
                continue
            hsize, children, payload, is_bin = h
            if size + pos + hsize + payload > self.max_message:
                raise ProtocolError(f"a message larger than {self.max_message} bytes")
            left += children - 1
            if is_bin and payload >= BIG:
                self.partial = True
                pieces.append(self._buf[self._lo:self._lo + pos])
                pieces.append(struct.pack(">BBI", 0xD6, _EXT_BIG, len(bigs)))
                dest = self._payload_buffer(payload)
                start = self._lo + pos + hsize
                have = min(payload, self._hi - start)
                dest[:have] = np.frombuffer(self._buf, np.uint8, have, start)
                got = have
                dview = memoryview(dest)
                while got < payload:
                    if on_recv:
                        on_recv()
                    n = sock.recv_into(dview[got:], payload - got)
                    if not n:
                        raise ConnectionError("connection closed by the daemon")
                    got += n
                bigs.append(dest)
                size += pos + hsize + payload
                self._lo = start + have
                if self._lo == self._hi:
                    self._lo = self._hi = 0
                pos = 0
                continue
            while self._lo + pos + hsize + payload > self._hi:
                more()
            pos += hsize + payload
        pieces.append(self._buf[self._lo:self._lo + pos])
        self._lo += pos
        if self._lo == self._hi:
            self._lo = self._hi = 0
        self.partial = False

        def ext_hook(code: int, data: bytes) -> Any:
            if code == _EXT_BIG and len(data) == 4:
                return bigs[struct.unpack(">I", data)[0]]
            return msgpack.ExtType(code, data)

        try:
            return msgpack.unpackb(b"".join(pieces), raw=False, ext_hook=ext_hook,
                                   max_bin_len=self.max_message, max_str_len=self.max_message)
        except Exception as e:  # msgpack's FormatError, StackError, ValueError ...
            raise ProtocolError(f"malformed data from the daemon: {e}") from None
