"""The whole-model pick between the sparse and the dense int8 kernels for a
quantized model's convs over sparse weights (runtime/model-int8-pick.c):
where the planner had that choice, both plans are timed whole at load, the
faster is kept, and the two times are cached so that a second load makes the
same choice without timing. No test here asserts a speed: the cache is
rigged to make either plan the faster, and the plan must follow it."""

import json
import shutil

import pytest

from tests.models import builders as B
from tests.models.test_quantized import REL_L2, TOP1, compare, info_json, prune_magnitude, quantize
from tests.models.runner import convd_run
from tests.models.test_sparse_models import cache_env, convctl  # noqa: F401 (fixture)

PICK_CACHE = "int8-pick-v1.txt"


@pytest.fixture
def pruned_int8(tmp_path, rng):
    """Layers wide enough at 95% for the float32 plan to run them sparse:
    their int8 candidates are timed on the sparse and the dense int8
    kernels."""
    g = B.Graph(rng)
    x = g.input("x", [64, 14, 14])
    y = g.relu(g.conv(x, 64, 256, 1))
    for k in (3, 1, 3, 1):
        y = g.relu(g.conv(y, 256, 256, k, pad=k // 2))
    y = B.fc_head(g, y, 256, 10, softmax=False)
    return quantize(prune_magnitude(g.build([y]), 0.95), tmp_path / "p95.onnx", rng)


def private_cache(tmp_path, cache_env):  # noqa: F811
    xdg = tmp_path / "xdg"
    shutil.copytree(cache_env["XDG_CACHE_HOME"], xdg)
    return dict(cache_env, XDG_CACHE_HOME=str(xdg), CONVD_INT8="auto"), xdg / "convd" / PICK_CACHE


def over_sparse(info):
    """The int8 convs whose weights the float32 plan would run sparse (timed
    on the dense int8 kernels too) and the kind of kernel each runs on."""
    return [(l["name"], l["kernel"].split(":")[0]) for l in info["layers"]
            if l.get("int8_dense_ms", -1) >= 0 and l["dtype"] == "int8"]


def check_follows(info, pick):
    kinds = {k for _, k in over_sparse(info)}
    want = {"dnnl"} if pick == "dense" else {"sparse-i8"}
    assert kinds == want, (pick, over_sparse(info))


def open_choice(info):
    if "int8_pick" not in info:
        pytest.skip("the planner had no sparse-or-dense int8 choice here (no dense int8 candidate timed over "
                    "sparse weights at this CPU/cap, or no conv runs int8 over sparse weights)")
    return info["int8_pick"]


def test_pick_times_both_plans_once_and_keeps_the_faster(pruned_int8, tmp_path, rng, cache_env):  # noqa: F811
    env, cache = private_cache(tmp_path, cache_env)
    first = info_json(pruned_int8, env)
    pick = open_choice(first)
    assert pick["by"] == "model" and pick["dense_ms"] > 0 and pick["sparse_ms"] > 0, pick
    faster = "dense" if pick["dense_ms"] < pick["sparse_ms"] else "sparse"
    assert pick["kernels"] == faster, pick
    check_follows(first, faster)
    lines = cache.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pick|"), lines
    # A second load takes the times from the cache: no timing, same plan.
    second = info_json(pruned_int8, env)
    assert second["int8_pick"] == pytest.approx(dict(pick, by="cache"), rel=1e-4), (second["int8_pick"], pick)
    assert cache.read_text().splitlines() == lines
    assert [(l["kernel"], l["dtype"]) for l in second["layers"]] == [(l["kernel"], l["dtype"]) for l in first["layers"]]


@pytest.mark.parametrize("pick", ["dense", "sparse"])
def test_pick_follows_the_cached_times_and_matches_onnxruntime(pick, pruned_int8, tmp_path, rng, cache_env):  # noqa: F811
    """Cached times that make `pick` the faster plan: the model runs on it,
    whichever the layers' sums preferred, and its outputs match
    onnxruntime's."""
    env, cache = private_cache(tmp_path, cache_env)
    open_choice(info_json(pruned_int8, env))
    key = cache.read_text().splitlines()[0].rpartition("\t")[0]
    cache.write_text(f"{key}\t{1.0 if pick == 'dense' else 9.0} {9.0 if pick == 'dense' else 1.0}\n")
    info = info_json(pruned_int8, env)
    assert info["int8_pick"] == {"kernels": pick, "by": "cache", "dense_ms": 1.0 if pick == "dense" else 9.0,
                                 "sparse_ms": 9.0 if pick == "dense" else 1.0, "batch": 1, "dense_batch_ms": -1.0,
                                 "sparse_batch_ms": -1.0}, info["int8_pick"]
    check_follows(info, pick)
    err, top1 = compare(pruned_int8, tmp_path, rng, env=env)
    assert err <= REL_L2 and top1 >= TOP1, (err, top1)


@pytest.mark.parametrize("pick", ["dense", "sparse"])
def test_pick_forced_by_the_environment_times_nothing(pick, pruned_int8, tmp_path, cache_env):  # noqa: F811
    env, cache = private_cache(tmp_path, cache_env)
    info = info_json(pruned_int8, dict(env, CONVD_INT8_PICK=pick))
    assert open_choice(info)["kernels"] == pick and info["int8_pick"]["by"] == "forced", info["int8_pick"]
    check_follows(info, pick)
    assert not cache.exists()


def test_pick_by_the_layers_sums_alone(pruned_int8, tmp_path, cache_env):  # noqa: F811
    env, cache = private_cache(tmp_path, cache_env)
    pick = open_choice(info_json(pruned_int8, dict(env, CONVD_INT8_PICK="layers")))
    assert pick["by"] == "layers" and pick["kernels"] == (
        "dense" if pick["dense_ms"] < pick["sparse_ms"] else "sparse"), pick
    assert not cache.exists()


def test_daemon_models_names_the_pick(pruned_int8, tmp_path, cache_env):  # noqa: F811
    """The daemon's load picks too (at its own threads and max batch) and
    `models` says which kernels it kept: the faster of the times it cached."""
    from tests.integration.daemon_wire import Wire
    from tests.support.daemon import TestDaemon
    env, cache = private_cache(tmp_path, cache_env)
    models_dir = tmp_path / "m"
    models_dir.mkdir()
    shutil.copy(pruned_int8, models_dir / "q.onnx")
    with TestDaemon(models_dir=models_dir, env=env) as d, Wire.connect(d, timeout=120) as w:
        (entry,) = w.result("models")["models"]
        table = convctl("--socket", d.socket, "models").stdout
    # The operator's table says it beside the int8 layer count.
    if entry["int8_pick"] != "none":
        assert f"int8, {entry['int8_pick']})" in table, table
    if not cache.exists():
        assert entry["int8_pick"] == "none", entry
        open_choice({})  # skips, saying why
    # Its max batch (8 by default) is above 1: the times alone and at it.
    alone, batch = ([float(v) for v in line.rpartition("\t")[2].split()] for line in cache.read_text().splitlines())
    want = by_product({"dense_ms": alone[0], "sparse_ms": alone[1], "dense_batch_ms": batch[0],
                       "sparse_batch_ms": batch[1]})
    assert entry["int8_pick"] == want, (entry, alone, batch)


def by_product(p):
    return "dense" if p["dense_ms"] * p["dense_batch_ms"] < p["sparse_ms"] * p["sparse_batch_ms"] else "sparse"


def test_pick_at_a_max_batch_times_the_full_batch_too(pruned_int8, tmp_path, cache_env):  # noqa: F811
    """With a max batch above 1 both plans are timed at it too, and the plan
    with the smaller product of its two times stays; cached as two lines."""
    env, cache = private_cache(tmp_path, cache_env)
    info = json.loads(convd_run(pruned_int8, ["--info", "--json", "--max-batch", "4"], env=env).stdout)
    pick = open_choice(info)
    assert pick["by"] == "model" and pick["batch"] == 4 and pick["dense_batch_ms"] > 0 and pick["sparse_batch_ms"] > 0
    assert pick["kernels"] == by_product(pick), pick
    check_follows(info, pick["kernels"])
    lines = cache.read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith(lines[0].rpartition("\t")[0] + "|at b4\t"), lines


def test_a_plan_slower_alone_but_faster_on_the_full_batch_wins(pruned_int8, tmp_path, cache_env):  # noqa: F811
    """Cached times where dense is 10% faster at batch 1 and sparse 3x faster
    at the max batch: the sparse plan stays; and the reverse."""
    env, cache = private_cache(tmp_path, cache_env)
    args = ["--info", "--json", "--max-batch", "4"]
    open_choice(json.loads(convd_run(pruned_int8, args, env=env).stdout))
    key = cache.read_text().splitlines()[0].rpartition("\t")[0]
    for alone, batch, want in (("1.0 1.1", "30 10", "sparse"), ("1.1 1.0", "10 30", "dense")):
        cache.write_text(f"{key}\t{alone}\n{key}|at b4\t{batch}\n")
        info = json.loads(convd_run(pruned_int8, args, env=env).stdout)
        assert info["int8_pick"]["kernels"] == want and info["int8_pick"]["by"] == "cache", info["int8_pick"]
        check_follows(info, want)
