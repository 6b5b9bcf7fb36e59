"""convd.aio.AsyncClient: against the real daemon (methods, inference equal to
the synchronous client and the reference, many concurrent calls on one
connection) and against a scripted asyncio server in this file (answers out
of order, held answers and timeouts, the server closing mid-flight, garbage,
the in-flight bound, cancellation).

Every test that sends many requests counts them: each call gets exactly one
outcome.
"""
import asyncio
import os
import tempfile

import msgpack
import numpy as np
import pytest

import convd
from convd import ConvdError
from convd.aio import AsyncClient, connect

from tests.integration import client_models


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def rand_x(rng, batch=None):
    batch = batch or int(rng.integers(1, 5))
    return (rng.standard_normal((batch, 3, 5, 7)) * 3).astype(np.float32)


# ---- the real daemon ---------------------------------------------------------

def test_status_methods_match_sync_client(scale2_daemon):
    async def main():
        async with AsyncClient(scale2_daemon.socket) as c:
            return (await c.hello(), await c.health(), await c.models(), await c.stats())

    hello, health, models, stats = run(main())
    with convd.Client(scale2_daemon.socket) as s:
        assert hello == s.hello()
        assert health["status"] == s.health()["status"]
        assert [m["name"] for m in models] == [m["name"] for m in s.models()]
    assert hello["server"] == "convd" and hello["protocol"] == 1
    assert "requests" in stats


def test_unknown_method_keeps_connection(scale2_daemon):
    async def main():
        async with AsyncClient(scale2_daemon.socket) as c:
            with pytest.raises(ConvdError) as e:
                await c.call("no_such_method")
            assert e.value.code == "E_METHOD"
            return await c.health()

    assert run(main())["status"] == "ok"


def test_connect_fails_with_e_connect(tmp_path):
    async def main():
        with pytest.raises(ConvdError) as e:
            await connect(str(tmp_path / "nobody.sock"))
        return e.value

    e = run(main())
    assert e.code == "E_CONNECT" and "nobody.sock" in e.message


def test_call_before_connect_is_e_closed():
    async def main():
        c = AsyncClient("/tmp/unused.sock")
        with pytest.raises(ConvdError) as e:
            await c.health()
        return e.value.code

    assert run(main()) == "E_CLOSED"


def test_infer_matches_sync_and_reference(scale2_daemon):
    rng = np.random.default_rng()
    xs = [rand_x(rng) for _ in range(20)]

    async def main():
        async with AsyncClient(scale2_daemon.socket) as c:
            return await asyncio.gather(*(c.infer("scale2", {"x": x}) for x in xs))

    ys = run(main())
    with convd.Client(scale2_daemon.socket) as s:
        for x, y in zip(xs, ys):
            assert set(y) == {"y"}
            assert y["y"].dtype == np.float32 and y["y"].shape == x.shape
            np.testing.assert_array_equal(y["y"], s.infer("scale2", {"x": x})["y"])
            np.testing.assert_allclose(y["y"], client_models.scale2_reference(x),
                                       rtol=1e-4, atol=1e-4)


def test_thousand_concurrent_infers_one_connection(scale2_daemon):
    rng = np.random.default_rng()
    n = 1000
    xs = [rand_x(rng, 1) for _ in range(n)]
    with convd.Client(scale2_daemon.socket) as s:
        before = s.stats()["requests"]["by_method"].get("infer", 0)

    async def main():
        async with AsyncClient(scale2_daemon.socket, max_inflight=256) as c:
            outs = await asyncio.gather(*(c.infer("scale2", {"x": x}) for x in xs),
                                        return_exceptions=True)
            assert c.inflight == 0
            return outs

    outs = run(main(), timeout=120)
    with convd.Client(scale2_daemon.socket) as s:
        after = s.stats()["requests"]["by_method"].get("infer", 0)
    assert after - before == n
    for x, y in zip(xs, outs):
        assert not isinstance(y, BaseException), y
        np.testing.assert_allclose(y["y"], client_models.scale2_reference(x), rtol=1e-4,
                                   atol=1e-4)


def test_infer_errors_by_code(scale2_daemon):
    async def main():
        async with AsyncClient(scale2_daemon.socket) as c:
            x = np.zeros((1, 3, 5, 7), np.float32)
            cases = [c.infer("nope", {"x": x}),
                     c.infer("scale2", {"x": np.zeros((1, 3, 7, 5), np.float32)}),
                     c.infer("scale2", {"wrong": x}),
                     c.infer("scale2", {"x": x.astype(np.float64)}),
                     c.infer("scale2", {"x": x})]
            return await asyncio.gather(*cases, return_exceptions=True)

    res = run(main())
    assert [r.code for r in res[:4]] == ["E_NOT_FOUND", "E_SHAPE", "E_PARAMS", "E_DTYPE"]
    assert "nope" in res[0].message
    assert res[4]["y"].shape == (1, 3, 5, 7)


def test_load_and_unload(scale2_daemon):
    async def main():
        async with AsyncClient(scale2_daemon.socket) as c:
            entry = await c.load("s2b", "scale2.onnx", max_batch=2)
            names = [m["name"] for m in await c.models()]
            y = await c.infer("s2b", {"x": np.ones((2, 3, 5, 7), np.float32)})
            await c.unload("s2b")
            with pytest.raises(ConvdError) as e:
                await c.unload("s2b")
            return entry, names, y, e.value.code

    entry, names, y, code = run(main())
    assert entry["name"] == "s2b" and entry["max_batch"] == 2
    assert "s2b" in names
    np.testing.assert_array_equal(y["y"], np.full((2, 3, 5, 7), 2, np.float32))
    assert code == "E_NOT_FOUND"


# ---- the scripted server -----------------------------------------------------

class Script:
    """An asyncio msgpack-RPC server on a temporary socket.

    mode: 'echo' answers {outputs: inputs} at once; 'hold' keeps answers until
    release() (then answers them in reverse order); 'close_after' answers
    nothing and closes the connection once it has read `n` requests; 'garbage' answers with bytes that
    are not msgpack. Counts requests and the most seen outstanding at once.
    """

    def __init__(self, mode, n=0):
        self.mode, self.n = mode, n
        self.requests = 0
        self.held = []
        self.max_outstanding = 0
        self._dir = tempfile.TemporaryDirectory(prefix="cd-aio")
        self.path = os.path.join(self._dir.name, "s.sock")
        self._writers = []
        self._released = None

    async def __aenter__(self):
        self._released = asyncio.Event()
        self.server = await asyncio.start_unix_server(self._serve, self.path)
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        for w in self._writers:
            w.close()
        await self.server.wait_closed()
        self._dir.cleanup()

    def release(self):
        self._released.set()

    @staticmethod
    def answer(msgid, params):
        inputs = params.get("inputs", {}) if isinstance(params, dict) else {}
        return msgpack.packb([1, msgid, None, {"outputs": inputs}], use_bin_type=True)

    async def _serve(self, reader, writer):
        self._writers.append(writer)
        unpacker = msgpack.Unpacker(raw=False)
        release_task = asyncio.ensure_future(self._released.wait())
        try:
            while True:
                read = asyncio.ensure_future(reader.read(1 << 16))
                done, _ = await asyncio.wait({read, release_task},
                                             return_when=asyncio.FIRST_COMPLETED)
                if release_task in done and self.held:
                    for msgid, params in reversed(self.held):
                        writer.write(self.answer(msgid, params))
                    self.held = []
                    await writer.drain()
                if read not in done:
                    data = await read
                else:
                    data = read.result()
                if not data:
                    return
                unpacker.feed(data)
                for _, msgid, _, params in unpacker:
                    self.requests += 1
                    p = params[0] if params else {}
                    if self.mode == "garbage":
                        writer.write(b"\xc1\xc1 not msgpack")
                        await writer.drain()
                        return
                    if self.mode == "close_after":
                        if self.requests >= self.n:
                            return
                        continue
                    if self.mode == "hold" and not self._released.is_set():
                        self.held.append((msgid, p))
                        self.max_outstanding = max(self.max_outstanding, len(self.held))
                    else:
                        writer.write(self.answer(msgid, p))
                await writer.drain()
        finally:
            release_task.cancel()
            writer.close()


def echo_input(i):
    return np.full((1, 4), i, np.float32)


def test_answers_out_of_order_reach_their_call():
    async def main():
        async with Script("hold") as srv:
            async with AsyncClient(srv.path) as c:
                n = 200
                tasks = [asyncio.ensure_future(c.infer("m", {"x": echo_input(i)}))
                         for i in range(n)]
                while srv.requests < n:
                    await asyncio.sleep(0.01)
                assert c.inflight == n
                assert not any(t.done() for t in tasks)
                srv.release()  # answers in reverse order
                outs = await asyncio.gather(*tasks)
                return [float(o["x"][0, 0]) for o in outs]

    assert run(main()) == [float(i) for i in range(200)]


def test_timeout_then_late_answer_dropped():
    async def main():
        async with Script("hold") as srv:
            async with AsyncClient(srv.path) as c:
                results = await asyncio.gather(
                    *(c.infer("m", {"x": echo_input(i)}, timeout=0.1) for i in range(50)),
                    return_exceptions=True)
                assert all(isinstance(r, ConvdError) and r.code == "E_TIMEOUT"
                           for r in results), results
                assert "within 100 ms" in results[0].message
                assert c.inflight == 0
                srv.release()  # the late answers arrive now and are dropped
                # A chance for them to arrive before the next call (if they
                # come later, the call below still must get its own answer).
                await asyncio.sleep(0.1)
                y = await c.infer("m", {"x": echo_input(77)}, timeout=5)
                return float(y["x"][0, 0])

    assert run(main()) == 77.0


def test_server_closes_mid_flight_every_call_fails_once():
    async def main():
        async with Script("close_after", n=30) as srv:
            async with AsyncClient(srv.path) as c:
                res = await asyncio.gather(
                    *(c.infer("m", {"x": echo_input(i)}, timeout=10) for i in range(30)),
                    return_exceptions=True)
                with pytest.raises(ConvdError) as later:
                    await c.health()
                return res, later.value, c.inflight

    res, later, inflight = run(main())
    assert len(res) == 30
    assert all(isinstance(r, ConvdError) and r.code == "E_CLOSED" for r in res), res
    assert "closed by the daemon" in res[0].message
    assert later.code == "E_CLOSED"
    assert inflight == 0


def test_garbage_is_protocol_error():
    async def main():
        async with Script("garbage") as srv:
            async with AsyncClient(srv.path) as c:
                with pytest.raises(ConvdError) as e:
                    await c.health()
                with pytest.raises(ConvdError) as later:
                    await c.health()
                return e.value, later.value

    e, later = run(main())
    assert e.code == "E_PROTOCOL" and "malformed" in e.message
    assert later.code == "E_CLOSED"


def test_max_inflight_bounds_outstanding_requests():
    async def main():
        async with Script("hold") as srv:
            async with AsyncClient(srv.path, max_inflight=5) as c:
                tasks = [asyncio.ensure_future(c.infer("m", {"x": echo_input(i)}))
                         for i in range(40)]
                while srv.requests < 5:  # polled; pytest's timeout guards a hang
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.1)  # a chance for a sixth to show (absence check)
                assert srv.requests == 5 and c.inflight == 5
                srv.release()
                outs = await asyncio.gather(*tasks)
                return srv.max_outstanding, [float(o["x"][0, 0]) for o in outs]

    most, vals = run(main())
    assert most == 5
    assert vals == [float(i) for i in range(40)]


def test_close_fails_pending_calls():
    async def main():
        async with Script("hold") as srv:
            c = await connect(srv.path)
            tasks = [asyncio.ensure_future(c.infer("m", {"x": echo_input(i)}))
                     for i in range(10)]
            while srv.requests < 10:
                await asyncio.sleep(0.01)
            await c.close()
            return await asyncio.gather(*tasks, return_exceptions=True)

    res = run(main())
    assert all(isinstance(r, ConvdError) and r.code == "E_CLOSED" for r in res), res
    assert "closed by the client" in res[0].message


def test_cancelling_one_call_leaves_the_others():
    async def main():
        async with Script("hold") as srv:
            async with AsyncClient(srv.path) as c:
                tasks = [asyncio.ensure_future(c.infer("m", {"x": echo_input(i)}))
                         for i in range(6)]
                while srv.requests < 6:
                    await asyncio.sleep(0.01)
                tasks[2].cancel()
                while c.inflight != 5:  # the loop processes the cancellation
                    await asyncio.sleep(0.01)
                srv.release()
                return await asyncio.gather(*tasks, return_exceptions=True)

    res = run(main())
    assert isinstance(res[2], asyncio.CancelledError)
    assert [float(r["x"][0, 0]) for i, r in enumerate(res) if i != 2] == [0, 1, 3, 4, 5]
