"""Workers write responses themselves (daemon/conn.c, cd_conn_respond): the
worker that computed an infer request writes its response to the socket when
nothing else of that connection is queued; a partial write hands the rest to
the loop, and until it is out no other writer writes raw bytes.

Each test covers one edge of that, and counts requests sent against answers
received (and bytes received against the daemon's bytes_out):
  - many threads pipelining infer on ONE connection while the same connection
    sends hello/stats (loop replies sharing the fd): every answer once, each a
    whole msgpack-RPC response with its msgid, outputs right; with and
    without double buffering (--double-buffer on);
  - a reader that stops reading with big outputs (the worker's write is
    partial, the remainder goes to the loop, later answers queue behind it),
    then resumes: every byte arrives intact; and one that trickles (reads
    small bites while answers are produced), where any writer that skipped
    the queue would interleave messages;
  - a client that disconnects while workers finish: the daemon survives, the
    finished answers are dropped and counted;
  - a slow reader over the write-queue limit is still closed.
"""
import contextlib
import random
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

from tests.integration.client_models import scale2_reference, write_scale2
from tests.integration.daemon_wire import Wire, request
from tests.support import slow_model
from tests.support.daemon import TestDaemon

SEED = random.SystemRandom().randrange(1 << 30)
RNG = np.random.default_rng(SEED)
FAN_HW = 64


def fanout_model(path, cout):
    """x [N, 1, 64, 64] -> y [N, cout, 64, 64], y[:, c] = (c + 1) / 8 * x:
    16 KiB in, cout x 16 KiB out per item, easy to check in numpy."""
    import onnx
    from onnx import TensorProto, helper
    w = ((np.arange(cout, dtype=np.float32) + 1) / 8).reshape(cout, 1, 1, 1)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])], "fanout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, FAN_HW, FAN_HW])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", cout, FAN_HW, FAN_HW])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.flatten())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def fanout_reference(x, cout):
    w = ((np.arange(cout, dtype=np.float32) + 1) / 8).reshape(1, cout, 1, 1)
    return (x * w).astype(np.float32)


def tensor(a):
    return {"dtype": "f32", "shape": list(a.shape), "data": a.tobytes()}


def as_array(t):
    return np.frombuffer(t["data"], dtype=np.float32).reshape(t["shape"])


def assert_close(got, ref):
    assert got.shape == ref.shape
    err = np.abs(got - ref) / np.maximum(1.0, np.abs(ref))
    assert float(err.max(initial=0.0)) <= 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory, slow):
    d = tmp_path_factory.mktemp("models")
    write_scale2(d / "tiny.onnx")
    fanout_model(d / "fan16.onnx", 16)    # 256 KiB out per item
    fanout_model(d / "fan64.onnx", 64)    # 1 MiB out per item
    fanout_model(d / "fan256.onnx", 256)  # 4 MiB out per item
    slow.write(d / "slow.onnx")  # tests/support/slow_model.py: ~30 ms per item
    return d


def stats_raw(daemon):
    """(stats result, bytes of its response) on a fresh connection."""
    with daemon.connect_raw(timeout=30) as s:
        s.sendall(request(1, "stats"))
        u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
        n = 0
        while True:
            data = s.recv(1 << 20)
            assert data, "stats connection closed"
            n += len(data)
            u.feed(data)
            for m in u:
                assert m[0] == 1 and m[1] == 1 and m[2] is None, m
                return m[3], n


class Reader(threading.Thread):
    """Reads whole msgpack-RPC responses from sock until `expect` of them have
    arrived (or EOF/timeout), counting the bytes. A response whose bytes were
    interleaved with another's does not parse as [1, msgid, err, result] with
    a msgid we sent, and fails the test."""

    def __init__(self, sock, expect, timeout=120):
        super().__init__(daemon=True)
        self.sock, self.expect, self.timeout = sock, expect, timeout
        self.got, self.nbytes, self.error, self.eof = {}, 0, None, False
        self.unpacker = msgpack.Unpacker(raw=False, strict_map_key=False,
                                         max_buffer_size=1 << 30)

    def run(self):
        deadline = time.monotonic() + self.timeout
        try:
            while len(self.got) < self.expect and time.monotonic() < deadline:
                self.sock.settimeout(max(0.1, deadline - time.monotonic()))
                data = self.sock.recv(1 << 20)
                if not data:
                    self.eof = True
                    return
                self.nbytes += len(data)
                self.unpacker.feed(data)
                for m in self.unpacker:
                    assert isinstance(m, list) and len(m) == 4 and m[0] == 1, repr(m)[:200]
                    assert m[1] not in self.got, f"msgid {m[1]} answered twice"
                    self.got[m[1]] = m
        except (ConnectionResetError, socket.timeout):
            self.eof = True
        except Exception as e:  # noqa: BLE001 -- reported by the test thread
            self.error = e


def wait_idle(w, timeout=60):
    """Waits for in_flight 0; the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout
    while w.result("stats")["requests"]["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)  # polls the counter: the state waited for
    assert w.result("stats")["requests"]["in_flight"] == 0


def worker_paths(s):
    r = s["requests"]
    return r["direct"] + r["direct_partial"] + r["direct_queued"]


@pytest.mark.parametrize("double_buffer", ["off", "on"])
def test_many_threads_pipeline_infer_with_hello_and_stats_on_one_connection(
        tmp_path, models, double_buffer):
    nthreads, per_thread, n_loop = 4, random.randint(100, 160), random.randint(60, 100)
    with TestDaemon(tmp_path, models_dir=models,
                    args=["--workers", "2", "--max-batch", "4", "--max-delay-us", "0",
                          "--double-buffer", double_buffer]) as d, \
            contextlib.ExitStack() as stack:
        s0, s0_bytes = stats_raw(d)
        sock = stack.enter_context(d.connect_raw(timeout=120))
        send_lock = threading.Lock()
        inputs, loop_ids = {}, []

        def sender(t):
            for i in range(per_thread):
                msgid = (t + 1) * 100000 + i
                x = RNG.standard_normal((random.randint(1, 4), 3, 5, 7)).astype(np.float32)
                inputs[msgid] = x
                msg = request(msgid, "infer", {"model": "tiny", "inputs": {"x": tensor(x)}})
                with send_lock:  # whole messages on the wire
                    sock.sendall(msg)

        def loop_sender():
            for i in range(n_loop):
                msgid = 900000 + i
                loop_ids.append(msgid)
                with send_lock:
                    sock.sendall(request(msgid, "hello" if i % 2 else "stats"))

        total = nthreads * per_thread + n_loop
        reader = Reader(sock, total)
        reader.start()
        threads = [threading.Thread(target=sender, args=(t,)) for t in range(nthreads)]
        threads.append(threading.Thread(target=loop_sender))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        reader.join(120)
        sock.close()
        assert reader.error is None, f"{reader.error!r} (seed {SEED})"
        # Every request answered exactly once (the reader refuses duplicates).
        assert len(reader.got) == total and set(reader.got) == set(inputs) | set(loop_ids)
        for msgid, x in inputs.items():
            m = reader.got[msgid]
            assert m[2] is None, m[2]
            assert_close(as_array(m[3]["outputs"]["y"]), scale2_reference(x))
        for i, msgid in enumerate(loop_ids):
            m = reader.got[msgid]
            assert m[2] is None
            assert ("server" in m[3]) if i % 2 else ("requests" in m[3])
        s1, _ = stats_raw(d)
        # bytes_out is exact: the first stats answer plus this connection's bytes.
        assert s1["bytes_out"] - s0["bytes_out"] == s0_bytes + reader.nbytes
        # Every infer answer went through a worker's respond path; some were
        # written whole by the worker (nothing else pending at that moment).
        assert worker_paths(s1) - worker_paths(s0) == nthreads * per_thread
        assert s1["requests"]["direct"] > s0["requests"]["direct"]
        assert s1["requests"]["dropped"] == s0["requests"]["dropped"]
        assert s1["connections"]["write_errors"] == 0


def test_stalled_reader_gets_every_byte_after_partial_worker_writes(tmp_path, models):
    # (stack: the test's sockets close before the daemon stops, even when an
    # assertion fails -- a daemon drains until its clients have read.)
    with TestDaemon(tmp_path, models_dir=models, args=["--workers", "1", "--max-batch", "2"]) as d, \
            contextlib.ExitStack() as stack:
        s0, s0_bytes = stats_raw(d)
        n = random.randint(8, 12)
        sock = stack.enter_context(d.connect_raw(timeout=120))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        msgs, inputs = [], {}
        for i in range(n):
            x = RNG.standard_normal((random.randint(1, 2), 1, FAN_HW, FAN_HW)).astype(np.float32)
            inputs[i + 1] = x
            msgs.append(request(i + 1, "infer", {"model": "fan64", "inputs": {"x": tensor(x)}}))
            if i == n // 2:  # loop replies in the middle, behind the stalled bytes
                msgs += [request(1000, "hello"), request(1001, "stats")]
        sender = threading.Thread(target=lambda: sock.sendall(b"".join(msgs)))
        sender.start()
        with Wire.connect(d, timeout=120) as w:
            # Not reading: the first answer fills the socket, so the worker
            # writes part of it and hands the rest to the loop; the next ones
            # queue behind it (and past 4 MiB unsent the daemon stops reading
            # this client's requests). Wait until that state is steady.
            deadline, last, steady = time.monotonic() + 60, None, 0
            while time.monotonic() < deadline and steady < 5:
                r = w.result("stats")["requests"]
                now = (r["direct_partial"], r["direct_queued"], r["in_flight"])
                ok = (now[0] > s0["requests"]["direct_partial"]
                      and now[1] > s0["requests"]["direct_queued"] and now[2] == 0)
                steady = steady + 1 if ok and now == last else 0
                last = now
                time.sleep(0.05)  # polls the counters: the state waited for
            assert steady == 5, last
            reader = Reader(sock, n + 2)
            reader.start()  # resume reading
            reader.join(120)
            sender.join(30)
            sock.close()
            assert reader.error is None, f"{reader.error!r} (seed {SEED})"
            assert len(reader.got) == n + 2 and not reader.eof
            for msgid, x in inputs.items():
                m = reader.got[msgid]
                assert m[2] is None, m[2]
                assert_close(as_array(m[3]["outputs"]["y"]), fanout_reference(x, 64))
            assert reader.got[1000][3]["server"] == "convd"
            assert reader.got[1001][2] is None
            wait_idle(w)
            assert worker_paths(w.result("stats")) - worker_paths(s0) == n
        s1, _ = stats_raw(d)
        # Exact byte count: stats answers of w are counted separately below.
        assert s1["connections"]["slow_readers"] == 0
        assert s1["connections"]["write_errors"] == 0
        assert s1["requests"]["dropped"] == s0["requests"]["dropped"]
        assert s1["bytes_out"] - s0["bytes_out"] >= s0_bytes + reader.nbytes


def test_stalled_reader_bytes_out_is_exact(tmp_path, models):
    # The same edge with nothing else on the daemon, so bytes_out can be
    # compared exactly with what the client received.
    with TestDaemon(tmp_path, models_dir=models, args=["--workers", "2", "--max-batch", "1"]) as d, \
            contextlib.ExitStack() as stack:
        s0, s0_bytes = stats_raw(d)
        n = random.randint(6, 10)
        sock = stack.enter_context(d.connect_raw(timeout=120))
        xs = {i + 1: RNG.standard_normal((1, 1, FAN_HW, FAN_HW)).astype(np.float32)
              for i in range(n)}
        sock.sendall(b"".join(request(i, "infer", {"model": "fan16", "inputs": {"x": tensor(x)}})
                              for i, x in xs.items()))
        # Answers pile up unread (n x 256 KiB > the socket buffer): wait until
        # every request was computed, its answer written or queued. The
        # polls' own answers count in bytes_out too.
        polled, deadline = 0, time.monotonic() + 120  # hang guard
        while True:
            s, nbytes = stats_raw(d)
            polled += nbytes
            if s["models"]["fan16"]["ok"] == n and s["requests"]["in_flight"] == 0:
                break
            assert time.monotonic() < deadline, s["requests"]
            time.sleep(0.02)  # polls the counters: the state waited for
        reader = Reader(sock, n)
        reader.start()
        reader.join(120)
        sock.close()
        assert reader.error is None and len(reader.got) == n
        for i, x in xs.items():
            assert_close(as_array(reader.got[i][3]["outputs"]["y"]), fanout_reference(x, 16))
        s1, _ = stats_raw(d)
        assert s1["bytes_out"] - s0["bytes_out"] == s0_bytes + polled + reader.nbytes
        assert worker_paths(s1) - worker_paths(s0) == n
        assert s1["requests"]["direct_partial"] > s0["requests"]["direct_partial"]


def test_trickle_reader_while_workers_answer_gets_whole_messages(tmp_path, models):
    # A reader that takes small bites with pauses while two workers produce
    # 1 MiB answers and the loop answers hello/stats on the same socket:
    # the socket keeps having a little room, so every writer (worker or loop)
    # that wrote raw bytes while another's message was unfinished would
    # interleave them.
    # Batches of 4: a worker responds to all four before it hands them back,
    # so the rest of a partly written first answer waits ~1 ms (the packing
    # of the other three) for the loop, while hello/stats keep arriving.
    with TestDaemon(tmp_path, models_dir=models,
                    args=["--workers", "2", "--max-batch", "4", "--max-delay-us", "3000"]) as d, \
            contextlib.ExitStack() as stack:
        s0, s0_bytes = stats_raw(d)
        sock = stack.enter_context(d.connect_raw(timeout=120))
        n = random.randint(40, 60)
        xs, msgs, loop_ids = {}, [], []
        for i in range(n):
            xs[i + 1] = RNG.standard_normal((1, 1, FAN_HW, FAN_HW)).astype(np.float32)
            msgs.append(request(i + 1, "infer", {"model": "fan64", "inputs": {"x": tensor(xs[i + 1])}}))
            for k in range(20):  # loop replies all along, to land between a
                # worker's partial write and the loop's queueing of its rest
                loop_ids.append(10000 + 100 * i + k)
                msgs.append(request(loop_ids[-1], "stats" if k == 0 else "hello"))

        def send_slowly():
            for m in msgs:
                sock.sendall(m)
                time.sleep(0.0002)  # paces the sender, to interleave with the workers

        sender = threading.Thread(target=send_slowly, daemon=True)
        sender.start()
        u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 30)
        got, nbytes = {}, 0
        deadline = time.monotonic() + 120
        while len(got) < n + len(loop_ids) and time.monotonic() < deadline:
            data = sock.recv(random.randint(4096, 65536))
            assert data
            nbytes += len(data)
            u.feed(data)
            for m in u:
                assert isinstance(m, list) and len(m) == 4 and m[0] == 1, repr(m)[:200]
                assert m[1] not in got
                got[m[1]] = m
            time.sleep(0.001)
        sender.join(30)
        assert set(got) == set(xs) | set(loop_ids)
        for i, x in xs.items():
            assert got[i][2] is None, got[i][2]
            assert_close(as_array(got[i][3]["outputs"]["y"]), fanout_reference(x, 64))
        s1, _ = stats_raw(d)
        assert s1["bytes_out"] - s0["bytes_out"] == s0_bytes + nbytes
        assert worker_paths(s1) - worker_paths(s0) == n


def test_disconnect_while_workers_finish_drops_and_counts(tmp_path, models, slow):
    # n runs of slow.item_s (measured) on two workers: when the first answer
    # is read, the next runs are in progress and most are still queued.
    n = random.randint(10, 16)
    with TestDaemon(tmp_path, models_dir=models, args=["--workers", "2", "--max-batch", "1"]) as d, \
            contextlib.ExitStack() as stack, Wire.connect(d, timeout=slow.limit(n)) as w:
        s0 = w.result("stats")
        x = slow.input(RNG)
        sock = stack.enter_context(d.connect_raw(timeout=slow.limit(n)))
        sock.sendall(b"".join(request(i + 1, "infer", {"model": "slow", "inputs": {"x": tensor(x)}})
                              for i in range(n)))
        reader = Reader(sock, 1, timeout=slow.limit(2))
        reader.run()  # the first answer(s): workers are busy with the next ones
        assert reader.error is None and 1 <= len(reader.got) < n, (len(reader.got), str(slow))
        sock.close()
        wait_idle(w, slow.limit(n))
        s = w.result("stats")
        cancelled = s["requests"]["cancelled"] - s0["requests"]["cancelled"]
        dropped = s["requests"]["dropped"] - s0["requests"]["dropped"]
        write_errors = s["connections"]["write_errors"] - s0["connections"]["write_errors"]
        computed = s["models"]["slow"]["ok"] - s0["models"]["slow"]["ok"]
        # Each request is accounted once: computed or cancelled before compute;
        # at least the one(s) running at the close finished for nobody.
        assert cancelled + computed == n
        assert 1 <= dropped + write_errors <= computed - len(reader.got)
        assert w.result("hello")["server"] == "convd"
        y = w.call("infer", {"model": "slow", "inputs": {"x": tensor(x)}})
        assert y[2] is None
    assert "AddressSanitizer" not in d.stderr_text()


def test_slow_reader_over_write_queue_limit_is_closed(tmp_path, models):
    # --max-message 8M: the cap on unsent bytes is max(2 x 8 MiB, 64 MiB).
    with TestDaemon(tmp_path, models_dir=models,
                    args=["--workers", "1", "--max-batch", "1", "--max-message", "8M"]) as d, \
            contextlib.ExitStack() as stack, Wire.connect(d, timeout=120) as w:
        s0 = w.result("stats")
        n = 24  # 24 x 4 MiB of answers > 64 MiB
        x = RNG.standard_normal((1, 1, FAN_HW, FAN_HW)).astype(np.float32)
        sock = stack.enter_context(d.connect_raw(timeout=60))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"".join(request(i + 1, "infer", {"model": "fan256", "inputs": {"x": tensor(x)}})
                              for i in range(n)))
        deadline = time.monotonic() + 60
        while (w.result("stats")["connections"]["slow_readers"] == s0["connections"]["slow_readers"]
               and time.monotonic() < deadline):
            time.sleep(0.05)  # polls the counter: the state waited for
        wait_idle(w)
        s = w.result("stats")
        assert s["connections"]["slow_readers"] == s0["connections"]["slow_readers"] + 1
        cancelled = s["requests"]["cancelled"] - s0["requests"]["cancelled"]
        computed = s["models"]["fan256"]["ok"]
        assert cancelled + computed == n
        assert s["requests"]["dropped"] - s0["requests"]["dropped"] >= 1
        # The answers were not kept: the daemon's count of unsent bytes is
        # back to nothing. (Not its RSS: glibc keeps freed 4 MiB buffers once
        # its mmap threshold has adapted, and TSan's shadow memory triples
        # the peak, so RSS measured the allocator, not the daemon.)
        assert s["connections"]["unsent_bytes"] == 0, s["connections"]
        assert w.result("hello")["server"] == "convd"
        # The dropped client reads what was sent before the close: whole
        # answers (each once, intact), then EOF, far fewer than n.
        reader = Reader(sock, n, timeout=30)
        reader.run()
        sock.close()
        assert reader.error is None
        assert reader.eof and len(reader.got) < n
        ref = fanout_reference(x, 256)
        for m in reader.got.values():
            assert m[2] is None
            assert_close(as_array(m[3]["outputs"]["y"]), ref)
