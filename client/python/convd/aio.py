"""asyncio client of the convd inference daemon: the same methods as
convd.Client, awaited, with many requests in flight on one connection.

    import asyncio
    import numpy as np
    from convd.aio import AsyncClient

    async def main():
        async with AsyncClient() as c:            # $CONVD_SOCKET, else default_socket()
            print((await c.health())["status"])
            xs = [np.random.rand(1, 3, 5, 7).astype(np.float32) for _ in range(100)]
            ys = await asyncio.gather(*(c.infer("scale2", {"x": x}) for x in xs))

    asyncio.run(main())

Pipelining: every call takes a fresh msgid and writes its whole request at
once (requests never interleave); one reader task hands each answer to the
call with its msgid, so answers may arrive in any order and a slow inference
does not hold up a quick call.

In flight: at most `max_inflight` calls (default 1024) are sent and not yet
answered; further calls wait for a free slot within their timeout.

Errors: ConvdError with .code, as convd.Client: the daemon's code
("E_NOT_FOUND", ...), "E_CONNECT", "E_TIMEOUT" (no answer in time; the
connection stays usable and a late answer is dropped), "E_CLOSED" (the
daemon closed the connection, or close() was called: every pending and later
call gets it), "E_PROTOCOL" (the daemon sent something that is not
msgpack-RPC; the connection is closed).

Cancelling the task awaiting a call abandons that call only (its answer is
dropped when it comes). A client belongs to the event loop it was connected
in.
"""
from __future__ import annotations

import asyncio
import itertools
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple

import msgpack

from . import ConvdError, default_socket, infer_outputs, infer_params

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from . import Timeout

__all__ = ["AsyncClient", "connect"]

_MAX_MESSAGE = 1 << 30


async def connect(path: Optional[str] = None, timeout: Optional[float] = 30.0,
                  connect_timeout: float = 5.0, max_inflight: int = 1024) -> AsyncClient:
    """Connects and returns an AsyncClient (same arguments)."""
    c = AsyncClient(path, timeout=timeout, connect_timeout=connect_timeout,
                    max_inflight=max_inflight)
    await c.connect()
    return c


class AsyncClient:
    """A connection to convd for asyncio. Connect with `await c.connect()` or
    `async with AsyncClient(...) as c`."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = 30.0,
                 connect_timeout: float = 5.0, max_inflight: int = 1024) -> None:
        if max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.path = path or os.environ.get("CONVD_SOCKET") or default_socket()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_inflight = max_inflight
        self._ids = itertools.count(1)
        self._pending: Dict[int, asyncio.Future] = {}  # msgid -> Future of (error, result)
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._task: Optional[asyncio.Task] = None  # the reader task
        self._slots: Optional[asyncio.Semaphore] = None  # Semaphore(max_inflight)
        self._broken: Optional[Tuple[str, str]] = None  # (code, message) once the stream is unusable

    # -- connection ---------------------------------------------------------
    async def connect(self) -> None:
        if self._writer is not None:
            return self
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.path, limit=1 << 20),
                self.connect_timeout)
        except asyncio.TimeoutError:
            raise ConvdError("E_CONNECT", f"cannot connect to {self.path}: timed out") from None
        except OSError as e:
            raise ConvdError("E_CONNECT", f"cannot connect to {self.path}: "
                             f"{e.strerror or e}") from None
        self._slots = asyncio.Semaphore(self.max_inflight)
        self._task = asyncio.get_running_loop().create_task(self._read_loop())
        return self

    async def close(self) -> None:
        """Closes the connection; pending calls get E_CLOSED."""
        self._fail_all("E_CLOSED", "connection closed by the client")
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def __aenter__(self) -> AsyncClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> bool:
        await self.close()
        return False

    @property
    def inflight(self) -> int:
        """Calls sent and not yet answered."""
        return len(self._pending)

    def _fail_all(self, code: str, message: str) -> None:
        """Marks the stream unusable (first reason wins) and fails every
        pending call with it."""
        if self._broken is None:
            self._broken = (code, message)
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConvdError(code, message))
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()

    async def _read_loop(self) -> None:
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=_MAX_MESSAGE)
        code, message = "E_CLOSED", "connection closed by the daemon"
        try:
            while True:
                data = await self._reader.read(1 << 20)
                if not data:
                    break
                try:
                    unpacker.feed(data)
                except msgpack.BufferFull:
                    code, message = "E_TOO_LARGE", "an answer is larger than 1 GiB"
                    break
                try:
                    for msg in unpacker:
                        self._dispatch(msg)
                except ConvdError as e:
                    code, message = e.code, e.message
                    break
                except Exception as e:  # msgpack's FormatError, StackError, ...
                    code, message = "E_PROTOCOL", f"malformed data from the daemon: {e}"
                    break
        except asyncio.CancelledError:
            code, message = "E_CLOSED", "connection closed by the client"
            raise
        except OSError as e:
            code, message = "E_CLOSED", f"connection lost: {e}"
        finally:
            self._fail_all(code, message)

    def _dispatch(self, msg: Any) -> None:
        if isinstance(msg, list) and len(msg) == 3 and msg[0] == 2:
            return  # a notification: nothing uses them yet
        if not (isinstance(msg, list) and len(msg) == 4 and msg[0] == 1
                and isinstance(msg[1], int)):
            raise ConvdError("E_PROTOCOL", f"malformed answer from the daemon: {msg!r:.100}")
        fut = self._pending.pop(msg[1], None)
        if fut is not None and not fut.done():  # else a late answer: dropped
            fut.set_result((msg[2], msg[3]))

    # -- calls --------------------------------------------------------------
    async def call(self, method: str, params: Optional[Dict[str, Any]] = None,
                   timeout: Timeout = ...) -> Any:
        """Calls method with params (a dict, or None for {}); returns the result.

        timeout: seconds for the whole call (waiting for a slot, sending, the
        answer); None waits forever; default the client's timeout."""
        if timeout is ...:
            timeout = self.timeout
        if self._writer is None and self._broken is None:
            raise ConvdError("E_CLOSED", "not connected (await connect() first)")
        req_params = params if params is not None else {}
        try:
            err, result = await asyncio.wait_for(self._roundtrip(method, req_params), timeout)
        except asyncio.TimeoutError:
            raise ConvdError("E_TIMEOUT", f"no answer to '{method}' within "
                             f"{timeout * 1000:.0f} ms") from None
        if err is not None:
            if isinstance(err, dict):
                raise ConvdError(str(err.get("code", "E_INTERNAL")), str(err.get("message", "")))
            raise ConvdError("E_INTERNAL", str(err))
        return result

    async def _roundtrip(self, method: str, params: Optional[Dict[str, Any]]) -> Any:
        async with self._slots:
            if self._broken:
                raise ConvdError("E_CLOSED", f"connection is closed: {self._broken[1]}")
            msgid = next(self._ids) & 0xFFFFFFFF
            req = msgpack.packb([0, msgid, method, [params]], use_bin_type=True)
            fut = asyncio.get_running_loop().create_future()
            self._pending[msgid] = fut
            try:
                # write() queues the whole message at once: requests never
                # interleave, and a timeout never cuts one short.
                self._writer.write(req)
                await self._writer.drain()
                return await fut
            except (ConnectionError, OSError) as e:
                self._fail_all("E_CLOSED", f"connection lost while sending: {e}")
                if fut.done() and fut.exception() is not None:
                    raise fut.exception() from None
                raise ConvdError("E_CLOSED", f"connection lost while sending: {e}") from None
            finally:
                # Timed out or cancelled: forget it, a late answer is dropped.
                if self._pending.get(msgid) is fut:
                    del self._pending[msgid]

    # -- methods ------------------------------------------------------------
    async def hello(self) -> Dict[str, Any]:
        return await self.call("hello")

    async def health(self) -> Dict[str, Any]:
        return await self.call("health")

    async def models(self) -> List[Dict[str, Any]]:
        """The list of model entries (the 'models' field of the answer)."""
        return (await self.call("models"))["models"]

    async def stats(self) -> Dict[str, Any]:
        return await self.call("stats")

    async def load(self, name: str, path: str, max_batch: Optional[int] = None) -> Dict[str, Any]:
        params = {"name": name, "path": path}
        if max_batch is not None:
            params["max_batch"] = int(max_batch)
        return await self.call("load", params)

    async def unload(self, name: str) -> Dict[str, Any]:
        return await self.call("unload", {"name": name})

    async def plan(self, model: str, batch: Optional[int] = None, runs: Optional[int] = None,
                   timeout: Timeout = ...) -> Dict[str, Any]:
        """As Client.plan: the daemon's plan of a loaded model, each layer
        profiled in the daemon."""
        params = {"model": model}
        if batch is not None:
            params["batch"] = int(batch)
        if runs is not None:
            params["runs"] = int(runs)
        return await self.call("plan", params, timeout=timeout)

    async def infer(self, model: str, inputs: Mapping[str, npt.ArrayLike],
                    outputs: Optional[Iterable[str]] = None,
                    timeout: Timeout = ...) -> Dict[str, np.ndarray]:
        """Runs model on {name: ndarray}; returns {name: ndarray}.

        outputs: names of the outputs wanted (default: all). A timeout is
        also sent to the daemon as the request's timeout_ms."""
        if timeout is ...:
            timeout = self.timeout
        result = await self.call("infer", infer_params(model, inputs, outputs, timeout), timeout=timeout)
        return infer_outputs(result)
