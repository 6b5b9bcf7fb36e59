"""Python client of the convd inference daemon (msgpack-RPC over a Unix socket).

    import numpy as np
    from convd import Client, ConvdError

    with Client() as c:                     # $CONVD_SOCKET, else default_socket()
        print(c.health()["status"])
        out = c.infer("resnet", {"input": np.zeros((1, 3, 224, 224), np.float32)})
        print(out["output"].shape)

Errors: every failure raises ConvdError with .code (the wire name, e.g.
"E_NOT_FOUND", or "E_CONNECT" / "E_CLOSED" / "E_TIMEOUT" / "E_PROTOCOL" for
local conditions) and .message.

Thread-safety: one Client may be shared by threads; calls are serialised by a
lock (one request in flight per Client). Use one Client per thread to run
calls concurrently.

Timeouts: `timeout` (seconds, default 30; None waits forever) bounds each
call; a call may pass its own. After a timeout the connection stays usable: a
late answer is recognised by its msgid and dropped.
"""
from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Union

import msgpack
import numpy as np

from . import region as _region
from . import wire as _wire
from .region import Region

if TYPE_CHECKING:
    from types import EllipsisType

    import numpy.typing as npt

    # A call's timeout: seconds, None (wait forever) or ... (the client's).
    Timeout = Union[float, None, EllipsisType]


def _read_version() -> str:
    # The project's one version: VERSION at the top of the tree, which
    # convd/VERSION links to (a copy of it in an installed package).
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION")) as f:
        return f.read().strip()


__version__ = _read_version()

__all__ = ["Client", "ConvdError", "Region", "SYSTEM_SOCKET", "default_socket", "encode_tensor",
           "decode_tensor", "__version__"]

SYSTEM_SOCKET = "/run/convd/convd.sock"
SOCKET_NAME = "convd.sock"
PROTOCOL = 1


def default_socket() -> str:
    """The daemon's default socket for the calling user, the rule convd
    itself and libconvd follow: /run/convd/convd.sock for root, else
    $XDG_RUNTIME_DIR/convd.sock. Raises ConvdError E_CONNECT when there is
    none (not root and XDG_RUNTIME_DIR unset). $CONVD_SOCKET is not consulted
    here; the clients check it first."""
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    run = os.environ.get("XDG_RUNTIME_DIR")
    if not run:
        raise ConvdError("E_CONNECT", "no socket given and no default: XDG_RUNTIME_DIR "
                         f"is not set (set CONVD_SOCKET, e.g. to {SYSTEM_SOCKET} for the "
                         "system daemon)")
    return os.path.join(run, SOCKET_NAME)

# wire dtype name <-> numpy dtype (little-endian). bf16 has no numpy dtype: its
# tensors decode as uint16 bit patterns.
_DTYPES = {
    "f32": np.dtype("<f4"),
    "f16": np.dtype("<f2"),
    "f64": np.dtype("<f8"),
    "i8": np.dtype("i1"),
    "u8": np.dtype("u1"),
    "i16": np.dtype("<i2"),
    "i32": np.dtype("<i4"),
    "i64": np.dtype("<i8"),
    "bool": np.dtype("?"),
}
_NAMES = {dt: name for name, dt in _DTYPES.items()}


class ConvdError(Exception):
    """A failed call: .code is the wire error name ("E_SHAPE"), .message the text."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def encode_tensor(a: npt.ArrayLike, raw: bool = False) -> Dict[str, Any]:
    """numpy array -> the wire tensor map {dtype, shape, data}. raw: data is
    the array's own buffer (convd.wire.Raw, sent from where it lies), not a
    bytes copy."""
    a = np.asarray(a)
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    name = _NAMES.get(np.dtype(dt))
    if name is None:
        raise ConvdError("E_DTYPE", f"dtype {a.dtype} is not supported "
                         f"(use one of {', '.join(sorted(_DTYPES))})")
    if a.ndim == 0:
        a = a.reshape(1)
    a = np.ascontiguousarray(a, dtype=_DTYPES[name])
    return {"dtype": name, "shape": list(a.shape), "data": _wire.Raw(a) if raw else a.tobytes()}


def decode_tensor(t: Mapping[str, Any]) -> np.ndarray:
    """The wire tensor map -> a numpy array owned by the caller: a view of the
    buffer a big payload was received into (convd.wire), else a copy."""
    try:
        name, shape, data = t["dtype"], t["shape"], t["data"]
    except (KeyError, TypeError):
        raise ConvdError("E_PROTOCOL", f"malformed tensor in the answer: {t!r:.100}")
    dt = np.dtype("<u2") if name == "bf16" else _DTYPES.get(name)
    if dt is None:
        raise ConvdError("E_DTYPE", f"unknown dtype {name!r} in the answer")
    if isinstance(data, np.ndarray):  # received into a buffer of its own
        return data.view(dt).reshape(shape)
    arr = np.frombuffer(data, dtype=dt)
    return arr.reshape(shape).copy()


def _encode_input(v: Any, regions: Optional[Mapping[str, Any]], raw: bool = False) -> Dict[str, Any]:
    """An input: its place in a registered region when it is a view of one,
    else its bytes (raw: its buffer, encode_tensor)."""
    at = _region.find(regions, v) if regions else None
    if at is None:
        return encode_tensor(v, raw)
    name = _NAMES.get(v.dtype)
    if name is None:
        raise ConvdError("E_DTYPE", f"dtype {v.dtype} is not supported")
    return {"dtype": name, "shape": list(v.shape), "region": at[0], "offset": at[1]}


def infer_params(model: str, inputs: Mapping[str, npt.ArrayLike],
                 outputs: Optional[Iterable[str]], timeout: Optional[float],
                 regions: Optional[Mapping[str, Any]] = None,
                 into: Optional[Mapping[str, np.ndarray]] = None, raw: bool = False) -> Dict[str, Any]:
    """The params of an infer request (both clients send the same). regions:
    the registered regions ({name: Region}); into: outputs to compute
    straight into views of them; raw: inline tensors as their buffers
    (convd.wire.Raw, for Client.call), not bytes copies."""
    params: Dict[str, Any] = {"model": model,
                              "inputs": {str(k): _encode_input(v, regions, raw) for k, v in inputs.items()}}
    if outputs is not None:
        params["outputs"] = [str(o) for o in outputs]
    if into:
        params["into"] = {}
        for k, v in into.items():
            at = _region.find(regions, v) if regions else None
            if at is None:
                raise ConvdError("E_PARAMS", f"'into' output {k!r} is not a C-contiguous view "
                                 "of a region registered on this client")
            params["into"][str(k)] = {"region": at[0], "offset": at[1], "size": v.nbytes}
    if timeout is not None:
        params["timeout_ms"] = max(1, int(timeout * 1000))
    return params


def infer_outputs(result: Any, into: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
    """The outputs of an infer answer, decoded; one written into a region is
    its view from `into` (reshaped to the answer's shape)."""
    try:
        outs = result["outputs"]
    except (KeyError, TypeError):
        raise ConvdError("E_PROTOCOL", "the answer to 'infer' has no outputs") from None
    got = {}
    for k, v in outs.items():
        if isinstance(v, dict) and "region" in v and into and k in into:
            got[k] = into[k].reshape(v["shape"])
        else:
            got[k] = decode_tensor(v)
    return got


class Client:
    """A connection to convd. Client(path=None, timeout=30.0)."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = 30.0,
                 connect_timeout: float = 5.0) -> None:
        self.path = path or os.environ.get("CONVD_SOCKET") or default_socket()
        self.timeout = timeout
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._reader = _wire.MessageReader(max_message=1 << 30)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(connect_timeout)
        try:
            self._sock.connect(self.path)
        except OSError as e:
            self._sock.close()
            self._sock = None
            raise ConvdError("E_CONNECT", f"cannot connect to {self.path}: "
                             f"{e.strerror or e}") from None
        self._broken: Optional[str] = None  # reason the stream is unusable, once it is
        self._regions: Dict[str, _region.Region] = {}  # registered here, by name

    # -- plumbing ---------------------------------------------------------
    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._broken = "connection closed by the client"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> bool:
        self.close()
        return False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _break(self, code: str, message: str) -> None:
        self._broken = message
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise ConvdError(code, message)

    def call(self, method: str, params: Optional[Dict[str, Any]] = None,
             timeout: Timeout = ..., fds: Iterable[int] = ()) -> Any:
        """Calls method with params (a dict, or None for {}); returns the result.
        fds: descriptors sent with the request (SCM_RIGHTS; region_register).

        Raises ConvdError with the daemon's code on an error answer."""
        if timeout is ...:
            timeout = self.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._broken:
                raise ConvdError("E_CLOSED", f"connection is closed: {self._broken}")
            msgid = next(self._ids) & 0xFFFFFFFF
            # The header pieces and the inputs' own buffers (wire.Raw).
            pieces = _wire.pack_pieces([0, msgid, method, [params if params is not None else {}]])
            try:
                self._sock.settimeout(timeout)
                fds = list(fds)
                if fds:  # the descriptors ride with the first bytes of the message
                    req = b"".join(pieces)
                    sent = socket.send_fds(self._sock, [req], fds)
                    pieces = [req[sent:]]
                _wire.send_pieces(self._sock, pieces)
            except socket.timeout:
                self._break("E_TIMEOUT", "timed out sending the request; "
                            "the connection is closed (request cut short)")
            except OSError as e:
                self._break("E_CLOSED", f"connection lost while sending: {e}")
            while True:
                msg = self._read_message(method, deadline, timeout)
                if (not isinstance(msg, list) or len(msg) != 4 or msg[0] != 1):
                    self._break("E_PROTOCOL", f"malformed answer from the daemon: {msg!r:.100}")
                if msg[1] != msgid:
                    continue  # a late answer to a call that timed out
                err, result = msg[2], msg[3]
                if err is not None:
                    if isinstance(err, dict):
                        raise ConvdError(str(err.get("code", "E_INTERNAL")),
                                         str(err.get("message", "")))
                    raise ConvdError("E_INTERNAL", str(err))
                return result

    def _read_message(self, method: str, deadline: Optional[float], timeout: Optional[float]) -> Any:
        """The next message from the daemon, its big payloads received in
        place (convd.wire); a timeout keeps the connection only when it
        struck between messages."""
        def set_timeout() -> None:
            left = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
            self._sock.settimeout(left)

        try:
            return self._reader.read(self._sock, set_timeout)
        except socket.timeout:
            if self._reader.partial:  # the stream is out of step: unusable
                self._break("E_TIMEOUT", f"no answer to '{method}' within {timeout * 1000:.0f} ms "
                            "(the connection is closed: an answer was cut short)")
            raise ConvdError("E_TIMEOUT", f"no answer to '{method}' "
                             f"within {timeout * 1000:.0f} ms") from None
        except _wire.ProtocolError as e:
            self._break("E_TOO_LARGE" if "larger than" in str(e) else "E_PROTOCOL", str(e))
        except ConnectionError:
            self._break("E_CLOSED", "connection closed by the daemon")
        except OSError as e:
            self._break("E_CLOSED", f"connection lost: {e}")

    # -- methods ----------------------------------------------------------
    def hello(self) -> Dict[str, Any]:
        return self.call("hello")

    def health(self) -> Dict[str, Any]:
        return self.call("health")

    def models(self) -> List[Dict[str, Any]]:
        """The list of model entries (the 'models' field of the answer)."""
        return self.call("models")["models"]

    def stats(self) -> Dict[str, Any]:
        return self.call("stats")

    def load(self, name: str, path: str, max_batch: Optional[int] = None) -> Dict[str, Any]:
        params = {"name": name, "path": path}
        if max_batch is not None:
            params["max_batch"] = int(max_batch)
        return self.call("load", params)

    def unload(self, name: str) -> Dict[str, Any]:
        return self.call("unload", {"name": name})

    def plan(self, model: str, batch: Optional[int] = None, runs: Optional[int] = None,
             timeout: Timeout = ...) -> Dict[str, Any]:
        """The plan the daemon runs for a loaded model: a dict with device,
        layout, cpu, measured_ms and 'layers' (each with kernel, layout,
        reference, shapes, FLOPs, sparsity fields and the measured_ms of
        `runs` runs at `batch`, profiled in the daemon).

        batch/runs: None for the daemon's defaults (1, 10). The profile takes
        about runs x one inference: pass a timeout that allows it."""
        params = {"model": model}
        if batch is not None:
            params["batch"] = int(batch)
        if runs is not None:
            params["runs"] = int(runs)
        return self.call("plan", params, timeout=timeout)

    def infer(self, model: str, inputs: Mapping[str, npt.ArrayLike],
              outputs: Optional[Iterable[str]] = None,
              timeout: Timeout = ..., into: Optional[Mapping[str, np.ndarray]] = None
              ) -> Dict[str, np.ndarray]:
        """Runs model on {name: ndarray}; returns {name: ndarray}.

        outputs: names of the outputs wanted (default: all). An input that is
        a view of a registered region is not sent, only named; into:
        {output name: a view of a registered region} the daemon writes that
        output into (the returned array is that view)."""
        if timeout is ...:
            timeout = self.timeout
        params = infer_params(model, inputs, outputs, timeout, self._regions, into, raw=True)
        result = self.call("infer", params, timeout=timeout)
        return infer_outputs(result, into)

    # -- shared-memory regions (convd.region) -------------------------------
    def register_region(self, region: _region.Region, name: str) -> Dict[str, Any]:
        """Sends region's memfd to the daemon under name (once); from then on
        an input that is a view of it, and an output in `into`, travel as
        their place in it. Returns {name, size, writable}."""
        got = self.call("region_register", {"name": name}, fds=[region.fd])
        self._regions[name] = region
        return got

    def unregister_region(self, name: str) -> None:
        self._regions.pop(name, None)
        self.call("region_unregister", {"name": name})

    def regions(self) -> List[Dict[str, Any]]:
        """The regions of this connection: [{name, size, writable, in_use}]."""
        return self.call("region_list")
