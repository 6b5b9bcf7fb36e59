"""Raw msgpack-RPC over a plain Unix socket, for the daemon tests.

Deliberately no project code: only `msgpack`, `socket` (and numpy for tensors), so the
tests prove that what convd speaks is the msgpack-RPC spec
(request [0, msgid, method, params], response [1, msgid, error, result]).
"""
import socket
import time

import msgpack
import numpy as np


def request(msgid, method, params=None):
    """Bytes of [0, msgid, method, [params]] ([] when params is None)."""
    return msgpack.packb([0, msgid, method, [] if params is None else [params]],
                         use_bin_type=True)


class Wire:
    def __init__(self, sock):
        self.sock = sock
        self.unpacker = msgpack.Unpacker(raw=False, strict_map_key=False,
                                         max_buffer_size=1 << 30)
        self.next_id = 1

    @classmethod
    def connect(cls, daemon, timeout=20.0):
        return cls(daemon.connect_raw(timeout=timeout))

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def send_request(self, method, params=None, msgid=None):
        if msgid is None:
            msgid = self.next_id
            self.next_id += 1
        self.send(request(msgid, method, params))
        return msgid

    def recv(self, n=1, timeout=20.0):
        """The next n decoded messages (raises on EOF or timeout)."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            for obj in self.unpacker:
                out.append(obj)
                if len(out) == n:
                    return out
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"got {len(out)} of {n} messages")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 20)
            if not data:
                raise EOFError(f"connection closed after {len(out)} of {n} messages")
            self.unpacker.feed(data)

    def recv_one(self, timeout=20.0):
        return self.recv(1, timeout)[0]

    def call(self, method, params=None, timeout=20.0):
        """Sends one request and returns its response [1, msgid, error, result]."""
        msgid = self.send_request(method, params)
        resp = self.recv_one(timeout)
        assert resp[0] == 1 and resp[1] == msgid, resp
        return resp

    def result(self, method, params=None):
        resp = self.call(method, params)
        assert resp[2] is None, resp[2]
        return resp[3]

    def error(self, method, params=None):
        """Sends a request that must fail; returns its error's code."""
        resp = self.call(method, params)
        assert resp[3] is None and isinstance(resp[2], dict), resp
        assert set(resp[2]) == {"code", "message"}, resp[2]
        assert resp[2]["message"], resp[2]
        return resp[2]["code"]

    def expect_eof(self, timeout=20.0):
        """Reads until the peer closes; returns the messages received first."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            out.extend(self.unpacker)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the daemon did not close the connection")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                return out
            if not data:
                return out
            self.unpacker.feed(data)


def stats(daemon):
    with Wire.connect(daemon) as w:
        return w.result("stats")


# float32 tensors on the wire, and the tests' float32 tolerance (relative error <= 1e-4).

def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


def from_wire(t):
    return np.frombuffer(t["data"], np.float32).reshape(t["shape"])


def assert_close(got, ref):
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = np.abs(got - ref) / np.maximum(1.0, np.abs(ref))
    assert err.max() <= 1e-4, err.max()
