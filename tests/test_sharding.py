"""Devices and processes, and the sharding vocabulary on one process.

Devices: JAX's queries with 1 and 4 virtual CPU devices, the environment variables read at
import (in a fresh interpreter), `default_device`. Sharding: meshes, `NamedSharding`'s blocks
(the devices-to-index maps recorded from JAX 0.10.2 with 4 devices), `device_put` variants,
the Array methods, `jit(in_shardings=, out_shardings=)`, `with_sharding_constraint`,
`reshard`, the `make_array_from_*` builders, `shard_map` with JAX's signature against NumPy,
the text pictures, and every error. Values never change with the layout: each result is
compared with the unsharded computation.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.sharding import (
    AbstractMesh,
    AxisType,
    Mesh,
    NamedSharding,
    P,
    SingleDeviceSharding,
    get_abstract_mesh,
    set_mesh,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def devices4():
    old = fg.config.cpu_device_count
    fg.config.update("cpu_device_count", 4)
    yield fg.devices()
    fg.config.update("cpu_device_count", old)


@pytest.fixture
def mesh22(devices4):
    return fg.make_mesh((2, 2), ("a", "b"))


X = np.arange(8.0, dtype=np.float32).reshape(4, 2)


# --- devices and processes --------------------------------------------------------------------

def test_one_process_one_device_by_default():
    assert fg.devices() == [fg.devices("cpu")[0]] and fg.device_count() == 1
    assert fg.local_devices() == fg.devices() and fg.local_device_count() == 1
    assert (fg.process_index(), fg.process_count(), fg.process_indices()) == (0, 1, [0])
    d = fg.devices()[0]
    assert (repr(d), str(d), d.id, d.platform, d.device_kind, d.process_index, d.host_id,
            d.local_hardware_id) == ("CpuDevice(id=0)", "cpu:0", 0, "cpu", "cpu", 0, 0, 0)
    assert isinstance(d, fg.Device) and d.memory_stats() is None
    with pytest.raises(errors.FuncgradValueError, match="process_index 1 does not exist"):
        fg.local_devices(process_index=1)


def test_sharding_on_one_device():
    mesh = fg.make_mesh((1,), ("data",))
    s = NamedSharding(mesh, P("data"))
    x = fg.device_put(X, s)
    assert x.sharding == s and x.devices() == {fg.devices()[0]} and s.is_fully_replicated
    step = fg.jit(lambda x: fnp.tanh(x) * 2, in_shardings=s, out_shardings=s)
    np.testing.assert_allclose(np.asarray(step(x)), np.tanh(X) * 2, rtol=1e-6)
    total = fg.shard_map(lambda b: lax.psum(b.sum(), "data"), mesh=mesh, in_specs=P("data"),
                         out_specs=P())(x)
    assert float(total) == float(X.sum())
    with pytest.raises(errors.FuncgradValueError, match="multiply to the number of devices"):
        fg.make_mesh((2,), ("data",))


def test_virtual_cpu_devices(devices4):
    assert [d.id for d in devices4] == [0, 1, 2, 3] and fg.device_count() == 4
    assert fg.local_devices() == devices4 and fg.local_device_count("cpu") == 4
    assert fg.device_put(fnp.ones(2), "cpu:2").devices() == {devices4[2]}
    with pytest.raises(errors.FuncgradValueError, match="cpu:7"):
        fg.device_put(fnp.ones(2), "cpu:7")
    with pytest.raises(errors.FuncgradValueError, match="positive int"):
        fg.config.update("cpu_device_count", 0)
        fg.devices()


def test_device_count_from_the_environment(monkeypatch):
    from funcgrad.config import _cpu_device_count_from_env as count
    monkeypatch.delenv("FUNCGRAD_CPU_DEVICE_COUNT", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert count() == 1
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false "
                                    "--xla_force_host_platform_device_count=3")
    assert count() == 3
    monkeypatch.setenv("FUNCGRAD_CPU_DEVICE_COUNT", "2")
    assert count() == 2
    monkeypatch.setenv("FUNCGRAD_CPU_DEVICE_COUNT", "two")
    with pytest.raises(ValueError, match="positive integer"):
        count()
    # read at import, so that a JAX test script that sets XLA_FLAGS first gets its devices
    code = "import funcgrad as fg; print(fg.device_count(), fg.local_device_count())"
    env = dict({k: v for k, v in os.environ.items() if k != "FUNCGRAD_CPU_DEVICE_COUNT"},
               PYTHONPATH=REPO, XLA_FLAGS="--xla_force_host_platform_device_count=3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, cwd=REPO)
    assert out.stdout.strip() == "3 3", out.stderr


def test_default_device(devices4):
    with fg.default_device(devices4[3]) as d:
        assert d == devices4[3] and fg.config.default_device == devices4[3]
        assert fg.device_put(fnp.ones(2)).device == devices4[3]
        with fg.default_device("cpu:1"):
            assert fg.device_put(X).devices() == {devices4[1]}
        assert fg.device_put(X).devices() == {devices4[3]}
    assert fg.config.default_device is None and fg.device_put(X).device == devices4[0]
    fg.config.update("jax_default_device", devices4[2])
    try:
        assert fg.device_put(X).device == devices4[2]
    finally:
        fg.config.update("jax_default_device", None)
    with pytest.raises(errors.FuncgradTypeError, match="give the device"):
        fg.default_device()


def test_device_put_variants(devices4, mesh22):
    x = fnp.asarray(X)
    assert fg.device_put(x) is x and fg.device_put(x, may_alias=True) is x
    copy = fg.device_put(x, may_alias=False)
    assert copy is not x and np.shares_memory(np.asarray(copy), np.asarray(x)) is False
    assert fg.device_put(x, donate=True) is x  # a hint, as in JAX
    assert fg.device_put(x, src=devices4[0]) is x
    rows = NamedSharding(mesh22, P("a"))
    tree = fg.device_put({"a": X, "b": (X, 1.0)}, {"a": devices4[1], "b": (rows, None)})
    assert tree["a"].device == devices4[1] and tree["b"][0].sharding.spec == P("a")
    assert tree["b"][1].shape == () and float(tree["b"][1]) == 1.0
    for leaf in fg.tree_util.tree_leaves(tree)[:2]:
        np.testing.assert_array_equal(np.asarray(leaf), X)
    # traced values (jit, grad) keep their value; the sharding is checked against the shape
    g = fg.grad(lambda v: fg.device_put(v * v, rows).sum())(X)
    np.testing.assert_array_equal(np.asarray(g), 2 * X)
    assert float(fg.jit(lambda v: fg.device_put(v, devices4[1]).sum())(X)) == X.sum()
    with pytest.raises(errors.FuncgradValueError, match="does not divide"):
        fg.jit(lambda v: fg.device_put(v, rows))(np.ones((3, 2)))
    with set_mesh(mesh22):
        assert fg.device_put(X, P(None, "b")).sharding == NamedSharding(mesh22, P(None, "b"))
    with pytest.raises(errors.FuncgradValueError, match="needs a mesh"):
        fg.device_put(X, P("a"))
    with pytest.raises(errors.FuncgradTypeError, match="donate must be a bool"):
        fg.device_put(X, donate="yes")
    with pytest.raises(errors.FuncgradValueError, match="pytree prefix"):
        fg.device_put((X, X), (devices4[0], devices4[1], devices4[2]))


# --- meshes and shardings ---------------------------------------------------------------------

def test_meshes(devices4):
    m = Mesh(np.array(devices4).reshape(2, 2), ("x", "y"))
    assert repr(m) == "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))"
    assert dict(m.shape) == {"x": 2, "y": 2} and m.size == 4 and m.axis_sizes == (2, 2)
    assert m.device_ids.tolist() == [[0, 1], [2, 3]] and m.local_devices == devices4
    assert not m.is_multi_process and m == Mesh(np.array(devices4).reshape(2, 2), ("x", "y"))
    made = fg.make_mesh((4,), ("d",))
    assert made.axis_types == (AxisType.Explicit,) and list(made.devices) == devices4
    assert fg.make_mesh((2, 2), ("a", "b"), (AxisType.Auto,) * 2).axis_types[1] is AxisType.Auto
    assert repr(AbstractMesh((2, 2), ("a", "b"))) == \
        "AbstractMesh('a': 2, 'b': 2, axis_types=(Auto, Auto))"
    assert get_abstract_mesh().empty
    with set_mesh(m):
        assert get_abstract_mesh() == m.abstract_mesh and fg.sharding.get_mesh() is m
    with m:  # JAX's older spelling
        assert fg.sharding.get_mesh() is m
    assert get_abstract_mesh().empty
    with pytest.raises(errors.FuncgradValueError, match="multiply to the number of devices"):
        fg.make_mesh((3,), ("d",))
    with pytest.raises(errors.FuncgradValueError, match="distinct strings"):
        Mesh(devices4, ("x", "x"))
    with pytest.raises(errors.FuncgradValueError, match="one dimension per axis name"):
        Mesh(np.array(devices4).reshape(2, 2), ("x",))


def test_named_sharding_blocks_match_jax(mesh22, devices4):
    s = NamedSharding(mesh22, P("a"))
    rows = [slice(0, 2), slice(0, 2), slice(2, 4), slice(2, 4)]  # recorded from JAX
    assert s.devices_indices_map((4, 2)) == {d: (r, slice(None)) for d, r in zip(devices4, rows)}
    assert s.shard_shape((4, 2)) == (2, 2) and s.replica_ids((4, 2)) == dict(zip(devices4,
                                                                               [0, 1, 0, 1]))
    both = NamedSharding(mesh22, P(("a", "b")))
    assert [i[0] for i in both.devices_indices_map((8,)).values()] == \
        [slice(2 * k, 2 * k + 2) for k in range(4)]
    swapped = NamedSharding(mesh22, P(("b", "a")))  # the first name varies slowest
    assert [i[0].start for i in swapped.devices_indices_map((8,)).values()] == [0, 4, 2, 6]
    assert repr(s) == ("NamedSharding(mesh=Mesh('a': 2, 'b': 2, axis_types=(Explicit, "
                       "Explicit)), spec=P('a',), memory_kind=device)")
    assert s == NamedSharding(mesh22, P("a", None)) and hash(s) == hash(NamedSharding(mesh22,
                                                                                     P("a",)))
    assert s.device_set == set(devices4) and s.num_devices == 4 and s.is_fully_addressable
    assert not s.is_fully_replicated and NamedSharding(mesh22, P()).is_fully_replicated
    one = SingleDeviceSharding(devices4[1])
    assert one.device_set == {devices4[1]} and one.is_fully_replicated and \
        one.shard_shape((3, 5)) == (3, 5)
    assert fg.sharding.make_single_device_sharding(devices4[1]) == one
    with pytest.raises(errors.FuncgradValueError, match="names axis 'a' twice"):
        NamedSharding(mesh22, P("a", "a"))
    with pytest.raises(errors.FuncgradTypeError, match="Mesh"):
        NamedSharding("mesh", P())


def test_partition_spec_is_jax_like():
    p = P("a", None, ("b", "c"))
    assert (len(p), p[2], list(p), p.index(None), p.count(None)) == \
        (3, ("b", "c"), ["a", None, ("b", "c")], 1, 1)
    assert repr(p) == "P('a', None, ('b', 'c'))" and repr(P("a")) == "P('a',)"
    assert P("a") != P("a", None) and P("a") != ("a",)
    assert fg.P is P and fg.sharding.PartitionSpec is P
    assert repr(P(P.UNCONSTRAINED)) == "P(UNCONSTRAINED,)"
    with pytest.raises(errors.FuncgradValueError, match="unreduced"):
        P("a", unreduced={"b"})


# --- arrays -----------------------------------------------------------------------------------

def test_array_methods(mesh22, devices4):
    plain = fnp.asarray(X)
    assert plain.sharding == SingleDeviceSharding(devices4[0]) and not plain.committed
    assert plain.devices() == {devices4[0]} and plain.is_fully_addressable
    assert plain.is_fully_replicated and len(plain.addressable_shards) == 1
    x = fg.device_put(X, NamedSharding(mesh22, P("a", "b")))
    assert x.committed and x.device == x.sharding
    shards = x.addressable_shards
    assert [s.device for s in shards] == devices4
    assert [s.index for s in shards][3] == (slice(2, 4), slice(1, 2))
    np.testing.assert_array_equal(np.asarray(shards[3].data), X[2:4, 1:2])
    np.testing.assert_array_equal(np.asarray(x.addressable_data(1)), X[0:2, 1:2])
    assert len(x.global_shards) == 4 and x.copy_to_host_async() is None
    np.testing.assert_array_equal(np.asarray(x * 2), X * 2)  # values are exact


def test_make_arrays_from_pieces(mesh22, devices4):
    s = NamedSharding(mesh22, P("a"))
    seen = []
    made = fg.make_array_from_callback((4, 2), s, lambda index: seen.append(index) or X[index])
    np.testing.assert_array_equal(np.asarray(made), X)
    assert made.sharding == s and len(seen) == 4
    pieces = [fg.device_put(X[sh.index], sh.device) for sh in made.addressable_shards][::-1]
    again = fg.make_array_from_single_device_arrays((4, 2), s, pieces)  # matched by device
    np.testing.assert_array_equal(np.asarray(again), X)
    by_position = fg.make_array_from_single_device_arrays(
        (4, 2), s, [X[:2], X[:2], X[2:], X[2:]])
    np.testing.assert_array_equal(np.asarray(by_position), X)
    local = fg.make_array_from_process_local_data(s, X)
    assert local.sharding == s and local.shape == (4, 2)
    with pytest.raises(errors.FuncgradValueError, match="has shape"):
        fg.make_array_from_callback((4, 2), s, lambda index: X)
    with pytest.raises(errors.FuncgradValueError, match="3 arrays for the 4 devices"):
        fg.make_array_from_single_device_arrays((4, 2), s, [X[:2]] * 3)
    with pytest.raises(errors.FuncgradValueError, match="global_shape"):
        fg.make_array_from_process_local_data(s, X, (8, 2))


def test_jit_with_shardings(mesh22):
    rows, cols = NamedSharding(mesh22, P("a")), NamedSharding(mesh22, P(None, "b"))
    f = fg.jit(lambda x, y: (x * 2 + y, (x - y).sum()), in_shardings=(rows, None),
               out_shardings=(cols, NamedSharding(mesh22, P())))
    out, total = f(X, X + 1)
    np.testing.assert_array_equal(np.asarray(out), 3 * X + 1)
    assert float(total) == float((X - X - 1).sum())
    assert out.sharding == cols and total.sharding.spec == P()
    assert f.trace_count == 1 and "mul" in f.lower(X, X).as_text()
    g = fg.grad(lambda x: f(x, x)[0].sum())(X)  # under a trace the layout is only checked
    np.testing.assert_array_equal(np.asarray(g), np.full_like(X, 3.0))
    with pytest.raises(errors.FuncgradValueError, match="does not match the sharding"):
        f(fg.device_put(X, cols), X)
    with pytest.raises(errors.FuncgradValueError, match="does not divide"):
        f(np.ones((3, 2)), np.ones((3, 2)))
    one = fg.jit(lambda x: x + 1, in_shardings=rows)  # one sharding for every argument
    assert one(fg.device_put(X, rows)).shape == (4, 2)
    with set_mesh(mesh22):
        spec = fg.jit(lambda x: x, out_shardings=P("b"))(X)
        assert spec.sharding == NamedSharding(mesh22, P("b"))


def test_with_sharding_constraint_and_reshard(mesh22):
    s = NamedSharding(mesh22, P("a", "b"))
    y = lax.with_sharding_constraint(X, s)
    assert y.sharding == s
    np.testing.assert_array_equal(np.asarray(y), X)
    jitted = fg.jit(lambda x: lax.with_sharding_constraint(x * 2, s))
    np.testing.assert_array_equal(np.asarray(jitted(X)), X * 2)
    with pytest.raises(errors.FuncgradValueError, match="does not divide"):
        fg.jit(lambda x: lax.with_sharding_constraint(x, s))(np.ones((3, 2)))
    with set_mesh(mesh22):
        tree = fg.reshard({"u": X, "v": X[0]}, {"u": P("a"), "v": P()})
        assert tree["u"].sharding.spec == P("a") and tree["v"].sharding.spec == P()
    with pytest.raises(errors.FuncgradValueError, match="needs a mesh"):
        fg.reshard(X, P("a"))


# --- shard_map with JAX's signature -----------------------------------------------------------

def test_shard_map_matches_numpy(mesh22):
    x = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    sm = fg.shard_map(lambda b: lax.psum(b.sum(0), "a"), mesh=mesh22, in_specs=P("a", "b"),
                      out_specs=P("b"))
    np.testing.assert_allclose(np.asarray(sm(x)), x.sum(0))
    blocks = fg.shard_map(lambda b: b * (1 + lax.axis_index("a") * 2 + lax.axis_index("b")),
                          mesh=mesh22, in_specs=P("a", "b"), out_specs=P("a", "b"))(x)
    factor = np.repeat(np.repeat(np.array([[1, 2], [3, 4]]), 2, 0), 4, 1)
    np.testing.assert_allclose(np.asarray(blocks), x * factor)
    assert blocks.sharding == NamedSharding(mesh22, P("a", "b"))
    gathered = fg.shard_map(lambda b: lax.all_gather(b, "b", axis=1, tiled=True), mesh=mesh22,
                            in_specs=P(None, "b"), out_specs=P(), check_vma=False)(x)
    np.testing.assert_allclose(np.asarray(gathered), x)
    tupled = fg.shard_map(lambda b: b + lax.axis_index(("a", "b"))[None] * 0, mesh=mesh22,
                          in_specs=P(("a", "b")), out_specs=P(("a", "b")))(x.reshape(-1))
    np.testing.assert_allclose(np.asarray(tupled), x.reshape(-1))


def test_shard_map_composes_and_infers(mesh22):
    w = np.float32(0.5)
    loss = fg.shard_map(lambda w, b: lax.pmean(fnp.tanh(b * w).mean(), ("a", "b")),
                        mesh=mesh22, in_specs=(P(), P("a", "b")), out_specs=P())
    x = np.linspace(-1, 3, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_allclose(float(loss(w, x)), np.tanh(x * w).mean(), rtol=1e-6)
    g = fg.grad(loss)(w, x)
    np.testing.assert_allclose(float(g), (x * (1 - np.tanh(x * w) ** 2)).mean(), rtol=1e-5)
    np.testing.assert_allclose(float(fg.jit(fg.grad(loss))(w, x)), float(g), rtol=1e-6)
    placed = fg.device_put(x, NamedSharding(mesh22, P("b")))
    inferred = fg.shard_map(lambda b: b.shape[0] + 0 * b, mesh=mesh22, out_specs=P("b"))(placed)
    np.testing.assert_array_equal(np.asarray(inferred), np.full_like(x, 2))
    with set_mesh(mesh22):  # the current mesh, and a subset of its axes
        half = fg.shard_map(lambda b: lax.psum(b, "a"), in_specs=P("a"), out_specs=P(),
                            axis_names={"a"})(x)
        np.testing.assert_allclose(np.asarray(half), x[:2] + x[2:])


def test_shard_map_replication_is_checked(mesh22):
    with pytest.raises(errors.FuncgradValueError, match="varies over mesh axis 'a'"):
        fg.shard_map(lambda b: b, mesh=mesh22, in_specs=P("a"), out_specs=P())(X)
    first = fg.shard_map(lambda b: b, mesh=mesh22, in_specs=P("a"), out_specs=P(),
                         check_vma=False)(X)  # untyped: member 0's block
    np.testing.assert_array_equal(np.asarray(first), X[:2])
    with pytest.raises(errors.FuncgradValueError, match="not one of the mapped mesh axes"):
        fg.shard_map(lambda b: b, mesh=mesh22, in_specs=P("c"), out_specs=P())(X)
    with pytest.raises(errors.FuncgradValueError, match="does not divide"):
        fg.shard_map(lambda b: b, mesh=mesh22, in_specs=P("a"), out_specs=P("a"))(X[:3])
    process_mesh = fg.distributed.Mesh(("data",))  # one member per process: the old API
    out = fg.shard_map(lambda b: lax.psum(b, "data"), mesh=process_mesh, in_specs=P("data"),
                       out_specs=P())(X)
    np.testing.assert_array_equal(np.asarray(out), X)


def test_visualize_sharding(mesh22, capsys):
    fg.debug.visualize_array_sharding(fg.device_put(X, NamedSharding(mesh22, P("a"))))
    fg.debug.visualize_sharding((4, 2), NamedSharding(mesh22, P("a", "b")))
    fg.debug.visualize_array_sharding(fnp.ones(3))
    assert capsys.readouterr().out == (
        "┌───────────┐\n│  CPU 0,1  │\n├───────────┤\n│  CPU 2,3  │\n└───────────┘\n"
        "┌─────────┬─────────┐\n│  CPU 0  │  CPU 1  │\n├─────────┼─────────┤\n"
        "│  CPU 2  │  CPU 3  │\n└─────────┴─────────┘\n"
        "┌─────────┐\n│  CPU 0  │\n└─────────┘\n")
    got = []
    fg.debug.inspect_array_sharding({"x": fnp.ones(2)}, callback=got.append)
    assert got == [SingleDeviceSharding(fg.devices()[0])]
    with pytest.raises(errors.FuncgradValueError, match="1-d and 2-d"):
        fg.debug.visualize_sharding((2, 2, 2), NamedSharding(mesh22, P()))
    with pytest.raises(errors.FuncgradTypeError, match="traced value"):
        fg.jit(lambda x: fg.debug.visualize_array_sharding(x) or x)(X)


def test_smap_auto_and_explicit_axes(mesh22):
    from funcgrad.sharding import ManualAxisType, auto_axes, explicit_axes, smap
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    with set_mesh(mesh22):
        out = smap(lambda b: lax.psum(b, "a") + 0 * b, in_axes=0, out_axes=0, axis_name="a")(x)
        np.testing.assert_allclose(np.asarray(out), np.tile(x[:2] + x[2:], (2, 1)))
        col = smap(lambda b, w: b * w, in_axes=(-1, None), out_axes=1, axis_name="b")(x, 3.0)
        np.testing.assert_allclose(np.asarray(col), x * 3)
        placed = auto_axes(lambda y: y * 2, out_sharding=P("a"))(x)
        assert placed.sharding.spec == P("a")
        seen = explicit_axes(lambda y: y.sharding.spec, in_sharding=P(None, "b"))(x)
        assert seen == P(None, "b")
    assert ManualAxisType(varying={"a"}) == ManualAxisType(varying=frozenset({"a"}))
    with pytest.raises(errors.FuncgradValueError, match="unreduced"):
        ManualAxisType(unreduced={"a"})
