"""Big tensors inline (issue 23 item 2): the daemon writes a big reply with
writev from the output buffer itself (daemon/reply.c), the request riding
with the write until its last byte is out; the clients send inputs from the
arrays' own memory and read big answers in place.

  - a request of several MiB in and out gives the in-process result
    (convd-run) and the shared-memory result, through the Python client, the
    raw wire;
  - many concurrent big requests from several connections;
  - a client that disconnects in the middle of a big reply, and one that
    sends a big request and closes before the answer: the daemon survives,
    counts the drop, and the next client is served (and a SAN build checks
    for leaks at exit);
  - a slow reader that takes the reply a few bytes at a time (the worker's
    write is partial, the loop writes the rest from the same buffers).
"""
import socket
import subprocess
import threading

import msgpack
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import convd
from tests.integration.daemon_wire import Wire, request
from tests.integration.test_daemon_models import assert_close
from tests.support import paths
from tests.support.daemon import TestDaemon

CIN, COUT, H, W = 8, 16, 384, 512  # 6 MiB in, 12 MiB out
SMALL_HW = 256  # the "mid" model: 1 -> 4 channels at 256x256, 1 MiB out


def conv1x1_model(path, cin, cout, h, w, seed):
    """x [N, cin, h, w] -> y: a 1x1 conv with bias; returns (weights, bias)."""
    rng = np.random.default_rng(seed)
    wt = rng.standard_normal((cout, cin, 1, 1)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1])], "c1",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", cin, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", cout, h, w])],
        [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return wt, b


def numpy_reference(wb, x):
    wt, b = wb
    return (np.einsum("oc,nchw->nohw", wt[:, :, 0, 0], x) + b[None, :, None, None]).astype(np.float32)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    wb = {"big": conv1x1_model(d / "big.onnx", CIN, COUT, H, W, seed=23),
          "mid": conv1x1_model(d / "mid.onnx", 1, 4, SMALL_HW, SMALL_HW, seed=5)}
    return d, wb


@pytest.fixture(scope="module")
def d(models):
    with TestDaemon(models_dir=models[0], args=["--threads", "1", "--workers", "2", "--max-batch", "1",
                                                "--max-message", "64M"]) as daemon:
        yield daemon


def stats(d):
    with convd.Client(d.socket) as c:
        return c.stats()


def big_input(rng, n=1):
    return rng.standard_normal((n, CIN, H, W)).astype(np.float32)


def test_big_inline_equals_in_process_and_shm(d, models, rng, tmp_path):
    x = big_input(rng)
    with convd.Client(d.socket) as c:
        inline = c.infer("big", {"x": x})["y"]
        with convd.Region(x.nbytes + COUT * H * W * 4) as r:
            c.register_region(r, "r")
            rx = r.array(x.shape, "f32")
            ry = r.array((1, COUT, H, W), "f32", offset=x.nbytes)
            rx[:] = x
            shm = c.infer("big", {"x": rx}, into={"y": ry})["y"]
            assert np.shares_memory(shm, ry)
            shm = np.array(shm)
            c.unregister_region("r")
            del rx, ry
    np.save(tmp_path / "x.npy", x)
    subprocess.run([str(paths.binary("convd-run")), str(models[0] / "big.onnx"), "--input", str(tmp_path / "x.npy"),
                    "--output", str(tmp_path / "y.npy"), "--threads", "1"], check=True, capture_output=True)
    in_process = np.load(tmp_path / "y.npy")
    assert np.array_equal(inline, shm)  # one daemon, one plan: the same bits
    assert_close(inline, in_process)
    assert_close(inline, numpy_reference(models[1]["big"], x))
    # The raw wire (msgpack alone) reads the same bytes.
    with Wire.connect(d) as w:
        res = w.result("infer", {"model": "big", "inputs": {"x": {"dtype": "f32", "shape": list(x.shape),
                                                                    "data": x.tobytes()}}})
    y = res["outputs"]["y"]
    assert np.array_equal(np.frombuffer(y["data"], np.float32).reshape(y["shape"]), inline)


def test_python_big_round_trip_is_a_view_of_its_own_buffer(d, models, rng):
    """The answer is received in place: the output is a view (no copy of it
    owned by the array), equal to numpy's; two answers held at once are two
    buffers; a buffer nothing refers to any more is reused."""
    with convd.Client(d.socket) as c:
        x1, x2 = big_input(rng), big_input(rng)
        y1 = c.infer("big", {"x": x1})["y"]
        y2 = c.infer("big", {"x": x2})["y"]
        assert not y1.flags["OWNDATA"] and not np.shares_memory(y1, y2)
        assert_close(y1, numpy_reference(models[1]["big"], x1))
        assert_close(y2, numpy_reference(models[1]["big"], x2))
        before = y1.copy()
        y3 = c.infer("big", {"x": x2})["y"]  # y1 and y2 still held: a third buffer
        assert np.array_equal(y1, before) and np.array_equal(y3, y2)
        addr = y1.__array_interface__["data"][0]
        del y1
        y4 = c.infer("big", {"x": x1})["y"]
        assert y4.__array_interface__["data"][0] == addr  # the released one, reused
        assert np.array_equal(y4, before)
        # A non-contiguous input is made contiguous, then sent.
        assert_close(c.infer("big", {"x": np.asfortranarray(x1)})["y"], before)


def test_many_concurrent_big_requests_from_several_connections(d, models, rng):
    nthreads, each = 4, 3
    xs = [[big_input(rng) for _ in range(each)] for _ in range(nthreads)]
    got, errors = {}, []

    def worker(t):
        try:
            with convd.Client(d.socket) as c:
                for i in range(each):
                    got[t, i] = c.infer("big", {"x": xs[t][i]})["y"].copy()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for t in range(nthreads):
        for i in range(each):
            assert_close(got[t, i], numpy_reference(models[1]["big"], xs[t][i]))


def infer_bytes(msgid, x, model="big"):
    return request(msgid, "infer", {"model": model, "inputs": {"x": {"dtype": "f32", "shape": list(x.shape),
                                                                     "data": x.tobytes()}}})


def test_disconnect_in_the_middle_of_a_big_reply(d, models, rng):
    x = big_input(rng)
    before = stats(d)
    for _ in range(3):
        with d.connect_raw() as s:
            # Two requests, one may wait behind the other; sent by a thread
            # while this one reads (reads stop while a reply is unread).
            def send_both():
                try:
                    s.sendall(infer_bytes(1, x) + infer_bytes(2, x))
                except OSError:
                    pass  # closed under it
            sender = threading.Thread(target=send_both)
            sender.start()
            got = 0
            while got < (3 << 20):  # a part of the first 12 MiB answer
                got += len(s.recv(1 << 16))
            s.shutdown(socket.SHUT_RDWR)
            sender.join()
    # The daemon goes on, and the next client is served.
    with convd.Client(d.socket) as c:
        assert_close(c.infer("big", {"x": x})["y"], numpy_reference(models[1]["big"], x))
    after = stats(d)
    assert after["connections"]["total"] >= before["connections"]["total"] + 4


def test_big_request_then_close_before_the_reply(d, models, rng):
    x = big_input(rng)
    for _ in range(3):
        s = d.connect_raw()
        s.sendall(infer_bytes(1, x))
        s.close()
    s = d.connect_raw()  # half of a big request, then gone
    s.sendall(infer_bytes(1, x)[: x.nbytes // 2])
    s.close()
    with convd.Client(d.socket) as c:
        assert_close(c.infer("big", {"x": x})["y"], numpy_reference(models[1]["big"], x))


def test_slow_reader_takes_big_replies_a_few_bytes_at_a_time(d, models, rng):
    """Two pipelined requests with 1 MiB answers read in bites of 1..97
    bytes: the workers' writes are partial (the socket fills), the loop
    writes the rest from the output buffers; every byte arrives in order."""
    xs = [rng.standard_normal((1, 1, SMALL_HW, SMALL_HW)).astype(np.float32) for _ in range(3)]
    before = stats(d)["requests"]
    s = d.connect_raw()
    s.sendall(b"".join(infer_bytes(i + 1, x, "mid") for i, x in enumerate(xs)))  # 768 KiB: taken whole
    s.settimeout(30)
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 30)
    answers = {}
    while len(answers) < len(xs):
        data = s.recv(int(rng.integers(1, 98)))
        assert data, "connection closed"
        unpacker.feed(data)
        answers.update((resp[1], resp) for resp in unpacker)
    s.close()
    for i, x in enumerate(xs):
        resp = answers[i + 1]  # two workers: in any order
        assert resp[0] == 1 and resp[2] is None, resp[:3]
        y = resp[3]["outputs"]["y"]
        assert_close(np.frombuffer(y["data"], np.float32).reshape(y["shape"]), numpy_reference(models[1]["mid"], x))
    after = stats(d)["requests"]
    assert after["direct_partial"] > before["direct_partial"]  # a worker left part of an answer to the loop
