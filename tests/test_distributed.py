"""funcgrad.distributed and the named-axis collectives.

Three layers (as in the scale-out note, shared/notes/scale-out.md):
- one process, no MPI needed: vmap(axis_name=...) against NumPy loops, the typing rules and
  the gradients of replicated and per-process losses, errors, the bucketing pass, the numpy
  lowering, the CUDA/NCCL library calls against a stub communicator (no GPU here);
- size 1 in this process: every collective under shard_map, eagerly and jitted;
- several processes: this file is also the worker script (`python -m mpi4py
  tests/test_distributed.py SCENARIO`), launched by `mpiexec -n 2` and `-n 4` on shared
  memory, each launch with a timeout and a cleanup that leaves no process behind.
Without mpi4py or mpiexec the multi-process tests skip locally and fail under CI=true.
"""

import ctypes
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.compiler import bucketing
from funcgrad.distributed import Mesh, P, shard_map
from funcgrad.lax.parallel import UnboundAxisError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _allclose(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol,
                               atol=atol)


def _stack_results(fn, xs):
    return np.stack([np.asarray(fn(x)) for x in xs])


# --- vmap(axis_name=...): the single-process oracle -------------------------------------------

X = np.arange(24.0, dtype=np.float32).reshape(4, 6) / 7.0 - 1.0  # 4 members, 6 values each


@pytest.mark.parametrize("op,ref", [
    (lax.psum, lambda xs: xs.sum(0)), (lax.pmean, lambda xs: xs.mean(0)),
    (lax.pmax, lambda xs: xs.max(0)), (lax.pmin, lambda xs: xs.min(0))])
def test_vmap_reductions_match_numpy(op, ref):
    out = fg.vmap(lambda x: op(x, "i"), axis_name="i")(X)
    _allclose(out, np.broadcast_to(ref(X), X.shape))
    jitted = fg.jit(fg.vmap(lambda x: op(x, "i"), axis_name="i"))(X)
    _allclose(jitted, out)


def test_vmap_unmapped_operand_and_python_constant():
    w = fnp.asarray(X[0])
    out = fg.vmap(lambda x, w: lax.psum(lax.pvary(w, "i"), "i") + 0 * x, in_axes=(0, None),
                  axis_name="i")(X, w)
    _allclose(out, np.broadcast_to(4 * X[0], X.shape))
    n = fg.vmap(lambda x: x * lax.psum(1, "i") + lax.axis_size("i"), axis_name="i")(X)
    _allclose(n, X * 4 + 4)


def test_vmap_axis_index_and_gathers():
    idx = fg.vmap(lambda x: lax.axis_index("i"), axis_name="i")(X)
    assert idx.dtype == np.int32 and list(np.asarray(idx)) == [0, 1, 2, 3]
    g = fg.vmap(lambda x: lax.all_gather(x, "i"), axis_name="i")(X)
    _allclose(g, np.broadcast_to(X, (4, 4, 6)))
    g1 = fg.vmap(lambda x: lax.all_gather(x.reshape(2, 3), "i", axis=1), axis_name="i")(X)
    _allclose(g1[2], np.moveaxis(X.reshape(4, 2, 3), 0, 1))
    gt = fg.vmap(lambda x: lax.all_gather(x, "i", tiled=True), axis_name="i")(X)
    _allclose(gt[0], X.reshape(-1))
    s = fg.vmap(lambda x: lax.psum_scatter(x.reshape(2, 3), "i", scatter_dimension=1,
                                           tiled=False), axis_name="i")(np.ones((3, 6)))
    _allclose(s, np.full((3, 2), 3.0))
    st = fg.vmap(lambda x: lax.psum_scatter(x[:4], "i", tiled=True), axis_name="i")(X)
    _allclose(st, X[:, :4].sum(0).reshape(4, 1))


def test_all_gather_and_psum_scatter_round_trip():
    def f(x):
        total = lax.psum_scatter(x, "i", tiled=True)  # member k: block k of the sum
        return lax.all_gather(total, "i", tiled=True)  # the whole sum again
    _allclose(fg.vmap(f, axis_name="i")(X[:, :4]), np.broadcast_to(X[:, :4].sum(0), (4, 4)))


def test_nested_named_vmaps():
    xs = X.reshape(2, 2, 6)
    inner = fg.vmap(fg.vmap(lambda x: lax.psum(x, "j"), axis_name="j"), axis_name="i")(xs)
    _allclose(inner, np.broadcast_to(xs.sum(1, keepdims=True), xs.shape))
    outer = fg.vmap(fg.vmap(lambda x: lax.psum(x, "i"), axis_name="j"), axis_name="i")(xs)
    _allclose(outer, np.broadcast_to(xs.sum(0, keepdims=True), xs.shape))
    both = fg.vmap(fg.vmap(lambda x: lax.psum(x, ("i", "j")), axis_name="j"), axis_name="i")(xs)
    _allclose(both, np.broadcast_to(xs.sum((0, 1), keepdims=True), xs.shape))
    idx = fg.vmap(fg.vmap(lambda x: lax.axis_index("i") * 10 + lax.axis_index("j"),
                          axis_name="j"), axis_name="i")(xs)
    assert np.asarray(idx).tolist() == [[0, 1], [10, 11]]


def test_jit_inside_named_vmap():
    f = fg.jit(lambda x: lax.pmean(fnp.sin(x), "i"))
    _allclose(fg.vmap(f, axis_name="i")(X), np.broadcast_to(np.sin(X).mean(0), X.shape))
    g = fg.vmap(fg.grad(lambda x: f(x).sum()), axis_name="i")(X)
    _allclose(g, np.cos(X) / 4)  # a replicated loss, counted once: d/dx_k mean_j sin(x_j)


# --- gradients: replicated vs per-process losses ----------------------------------------------

def test_grad_of_replicated_loss_is_not_overcounted():
    # L = psum(x)^2, the same scalar on every member, counted once: dL/dx_k = 2 * sum(x)
    x = fnp.array([1.0, 2.0, 3.0, 4.0])
    g = fg.vmap(fg.grad(lambda v: lax.psum(v, "i") ** 2), axis_name="i")(x)
    _allclose(g, np.full(4, 20.0))


def test_grad_of_per_process_loss_is_not_undercounted():
    # L_k = w_k * psum(x), one term per member: d(sum_k L_k)/dx_k = sum_j w_j
    x, w = fnp.array([1.0, 2.0, 3.0, 4.0]), fnp.array([1.0, -2.0, 5.0, 0.5])
    g = fg.vmap(fg.grad(lambda v, w: w * lax.psum(v, "i")), axis_name="i")(x, w)
    _allclose(g, np.full(4, 4.5))


def _data_parallel_problem():
    rng = np.random.default_rng(1)
    w = {"w": rng.normal(size=(6, 3)).astype(np.float32), "b": np.ones(3, np.float32)}
    xs = rng.normal(size=(4, 5, 6)).astype(np.float32)  # 4 members x 5 examples
    return w, xs


def _local_loss(p, x):
    return fnp.mean(fnp.tanh(x @ p["w"] + p["b"]) ** 2)


def test_grad_wrt_replicated_params_is_the_mean_or_the_sum():
    w, xs = _data_parallel_problem()
    per_member = [fg.grad(_local_loss)(w, x) for x in xs]
    mean = {k: np.mean([np.asarray(g[k]) for g in per_member], 0) for k in w}
    total = {k: np.sum([np.asarray(g[k]) for g in per_member], 0) for k in w}
    pmean_loss = lambda p, x: lax.pmean(_local_loss(p, x), "i")
    g = fg.vmap(fg.grad(pmean_loss), in_axes=(None, 0), out_axes=None, axis_name="i")(w, xs)
    g_sum = fg.vmap(fg.grad(_local_loss), in_axes=(None, 0), out_axes=None, axis_name="i")(w, xs)
    for k in w:
        _allclose(g[k], mean[k])
        _allclose(g_sum[k], total[k])
    # the same inside jit, and through jit called inside the vmap
    gj = fg.jit(fg.vmap(fg.grad(pmean_loss), in_axes=(None, 0), out_axes=None,
                        axis_name="i"))(w, xs)
    gi = fg.vmap(fg.grad(fg.jit(pmean_loss)), in_axes=(None, 0), out_axes=None,
                 axis_name="i")(w, xs)
    for k in w:
        _allclose(gj[k], mean[k])
        _allclose(gi[k], mean[k])


def test_collective_derivatives_numerically():
    from funcgrad.test_util import check_grads
    xs = np.linspace(-1, 1, 12).reshape(3, 4)
    for body in (lambda x: lax.psum(fnp.sin(x), "i") * x,
                 lambda x: lax.all_gather(x * x, "i").sum(0) * x,
                 lambda x: lax.psum_scatter(fnp.cos(x[:3]), "i", tiled=True) * x[0],
                 lambda x: lax.pmean(x, "i") ** 3):
        check_grads(fg.vmap(body, axis_name="i"), (xs,), order=2)


def test_loops_with_collectives_and_carry_typing():
    def body_sum(x):
        c, _ = lax.scan(lambda c, _: (c + lax.psum(x, "i"), None), fnp.zeros_like(x), None,
                        length=3)
        return c
    _allclose(fg.vmap(body_sum, axis_name="i")(X), np.broadcast_to(3 * X.sum(0), X.shape))

    def per_member(w, x, init):
        c, _ = lax.scan(lambda c, xi: (c + fnp.tanh(xi * w), None), init, x)
        return c
    w = fnp.float32(0.5)
    with pytest.raises(errors.FuncgradTypeError, match=r"lax.pvary\(init"):
        fg.vmap(fg.grad(per_member), in_axes=(None, 0, None), axis_name="i")(w, X, 0.0)
    g = fg.vmap(fg.grad(lambda w, x: per_member(w, x, lax.pvary(fnp.float32(0.0), "i"))),
                in_axes=(None, 0), out_axes=None, axis_name="i")(w, X)
    _allclose(g, sum(float(fg.grad(per_member)(w, x, 0.0)) for x in X))


def test_pmax_is_not_differentiable():
    with pytest.raises(errors.FuncgradTypeError, match="not differentiable"):
        fg.vmap(fg.grad(lambda x: lax.pmax(x, "i")), axis_name="i")(X[:, 0])
    out = fg.vmap(fg.grad(lambda x: x * lax.pmax(lax.stop_gradient(x), "i")),
                  axis_name="i")(X[:, 0])
    _allclose(out, np.full(4, X[:, 0].max()))


# --- errors -----------------------------------------------------------------------------------

def test_unbound_axis_name_is_a_clear_error():
    with pytest.raises(UnboundAxisError, match="'data'") as e:
        lax.psum(fnp.ones(2), "data")
    assert isinstance(e.value, NameError)
    with pytest.raises(UnboundAxisError, match=r"bound axis names: \('i',\)"):
        fg.vmap(lambda x: lax.psum(x, "j"), axis_name="i")(X)
    with pytest.raises(UnboundAxisError):
        fg.jit(lambda x: lax.axis_index("data"))(X)


def test_reducing_twice_is_a_type_error():
    with pytest.raises(errors.FuncgradTypeError, match="invariant over axis 'i'"):
        fg.vmap(lambda x: lax.psum(lax.psum(x, "i"), "i"), axis_name="i")(X)


def test_bad_axis_arguments():
    with pytest.raises(errors.FuncgradValueError, match="scatter_dimension"):
        fg.vmap(lambda x: lax.psum_scatter(x, "i"), axis_name="i")(X)
    with pytest.raises(errors.FuncgradTypeError, match="axis_name must be a string"):
        fg.vmap(lambda x: x, axis_name=3)
    with pytest.raises(errors.FuncgradValueError, match="one axis name"):
        fg.vmap(fg.vmap(lambda x: lax.all_gather(x, ("i", "j")), axis_name="j"),
                axis_name="i")(X.reshape(2, 2, 6))


def test_shard_map_spec_errors():
    mesh = Mesh(("data",))
    f = lambda w, x: lax.psum(x @ w, "data")
    w, x = fnp.ones((3, 2)), fnp.ones((4, 3))
    with pytest.raises(errors.FuncgradValueError, match="prefix of the argument tuple") as e:
        shard_map(f, mesh, in_specs=(P(),), out_specs=P())(w, x)
    assert "PyTreeDef" in str(e.value) or "structure" in str(e.value)
    with pytest.raises(errors.FuncgradValueError, match="axis 'model'"):
        shard_map(f, mesh, in_specs=(P(), P("model")), out_specs=P())
    with pytest.raises(errors.FuncgradTypeError, match="P\\(...\\) leaves"):
        shard_map(f, mesh, in_specs=(P(), "data"), out_specs=P())
    with pytest.raises(errors.FuncgradValueError, match="varies over mesh axis 'data'"):
        shard_map(lambda w, x: x @ w, mesh, in_specs=(P(), P("data")), out_specs=P())(w, x)
    with pytest.raises(errors.FuncgradValueError, match="has shape"):
        shard_map(lambda s: s, mesh, in_specs=P("data"), out_specs=P("data"))(1.0)
    with pytest.raises(errors.FuncgradTypeError, match="Mesh"):
        shard_map(f, "data", in_specs=(P(), P()), out_specs=P())


def test_missing_mpi4py_under_a_launch_names_the_extra(monkeypatch):
    from funcgrad.distributed import runtime
    monkeypatch.setitem(runtime._state, "world", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(fg.distributed.DistributedSetupError,
                       match=r"pip install funcgrad\[distributed\]"):
        fg.distributed.initialize()
    monkeypatch.delenv("PMI_SIZE")
    assert fg.distributed.initialize().size == 1  # one process: works without mpi4py


# --- size 1 in this process: every collective under shard_map ---------------------------------

def _every_collective(x, y):
    return {"psum": lax.psum(x, "data"), "pmean": lax.pmean(x, "data"),
            "pmax": lax.pmax(x, "data"), "pmin": lax.pmin(x, "data"),
            "gather": lax.all_gather(x, "data"), "gather_t": lax.all_gather(x, "data", axis=1,
                                                                             tiled=True),
            "scatter": lax.psum_scatter(y, "data", scatter_dimension=1),
            "scatter_t": lax.psum_scatter(x, "data", tiled=True),
            "index": lax.axis_index("data"), "tree": lax.psum((x, {"n": y.sum()}), "data"),
            "bool": lax.psum(x > 0, "data"), "half": lax.psum(x.astype(fnp.float16), "data")}


def test_every_collective_at_size_one():
    mesh = Mesh(("data",))
    assert mesh.size == fg.distributed.process_count() == 1
    x, y = fnp.asarray(X), fnp.ones((3, 1))
    f = shard_map(_every_collective, mesh, in_specs=P("data"), out_specs=P("data"))
    oracle = fg.vmap(_every_collective, axis_name="data")(x[None], y[None])
    for result in (f(x, y), fg.jit(f)(x, y)):
        flat, tree = fg.tree_util.tree_flatten(result)
        want, want_tree = fg.tree_util.tree_flatten(oracle)
        assert tree == want_tree
        for a, b in zip(flat, want):
            assert a.dtype == b.dtype
            _allclose(a, np.asarray(b)[0])


def test_shard_map_gradients_and_outputs_at_size_one():
    mesh = Mesh(("data",))
    w, xs = _data_parallel_problem()
    step = shard_map(lambda p, x: fg.value_and_grad(
        lambda p: lax.pmean(_local_loss(p, x), "data"))(p), mesh, in_specs=(P(), P("data")),
        out_specs=P())
    loss, g = step(w, xs[0])
    loss_j, g_j = fg.jit(step)(w, xs[0])
    want_loss, want = fg.value_and_grad(_local_loss)(w, xs[0])
    _allclose(loss, want_loss)
    _allclose(loss_j, want_loss)
    for k in w:
        _allclose(g[k], want[k])
        _allclose(g_j[k], want[k])
    assert fg.jit(step).trace_count == 1
    grad_outside = fg.grad(lambda p: shard_map(lambda p, x: lax.pmean(_local_loss(p, x), "data"),
                                               mesh, (P(), P("data")), P())(p, xs[0]))(w)
    for k in w:
        _allclose(grad_outside[k], want[k])


def test_host_utilities_at_size_one():
    tree = {"a": fnp.ones(3), "n": 3, "np": np.zeros(2)}
    out = fg.distributed.broadcast(tree)
    assert out["n"] == 3 and isinstance(out["a"], fg.Array)
    fg.distributed.check_replicated(tree, "tree")
    fg.distributed.barrier()
    with pytest.raises(errors.FuncgradTypeError, match="concrete"):
        fg.jit(lambda x: fg.distributed.broadcast(x))(fnp.ones(2))


# --- the bucketing pass and the numpy lowering ------------------------------------------------

def _grad_program(bucket_bytes):
    mesh = Mesh(("data",))
    w, xs = _data_parallel_problem()
    w["v"] = np.ones((3, 4), np.float32)
    loss = lambda p, x: lax.pmean(fnp.mean((fnp.tanh(x @ p["w"] + p["b"]) @ p["v"]) ** 2), "data")
    step = fg.jit(shard_map(fg.grad(loss), mesh, in_specs=(P(), P("data")), out_specs=P()))
    fg.config.update("collective_bucket_bytes", bucket_bytes)
    try:
        compiled = step.lower(w, xs[0]).compile()
        return compiled, step(w, xs[0]), w, xs[0]
    finally:
        fg.config.update("collective_bucket_bytes", 4 << 20)


def _psum_eqns(ir_text):
    return [line for line in ir_text.splitlines() if "= psum[" in line]


def test_bucketing_groups_gradient_allreduces():
    one, g_one, w, x = _grad_program(1 << 30)
    each, g_each, _, _ = _grad_program(0)
    small, g_small, _, _ = _grad_program(40)  # bytes: w (72) alone, b and v (12 + 48) apart
    assert len(_psum_eqns(one.ir_text())) == 1
    assert len(_psum_eqns(each.ir_text())) == 3
    assert len(_psum_eqns(small.ir_text())) == 3
    assert "pvary" not in one.ir_text()
    want = fg.grad(lambda p: fnp.mean((fnp.tanh(x @ p["w"] + p["b"]) @ p["v"]) ** 2))(w)
    for g in (g_one, g_each, g_small):
        for k in w:
            _allclose(g[k], want[k])


def test_bias_gradient_is_reduced_before_it_is_communicated():
    one, _, _, _ = _grad_program(0)
    shapes = [line.split("=")[0] for line in _psum_eqns(one.ir_text())]
    assert not any("f32[5," in s for s in shapes), shapes  # no batch-sized (5, 3) allreduce


def test_numpy_lowering_calls_mpi_in_place():
    each, _, _, _ = _grad_program(0)
    src = each.as_text()
    assert ".Allreduce(" in src
    assert "_IN_PLACE" in src  # a gradient computed into a temporary is reduced in its buffer
    mesh = Mesh(("data",))
    gather = fg.jit(shard_map(lambda x: (lax.all_gather(x, "data"), lax.psum_scatter(
        x, "data", tiled=True)), mesh, P("data"), P("data")))
    text = gather.lower(fnp.ones((4, 2))).compile().as_text()
    assert ".Allgather(" in text and ".Reduce_scatter_block(" in text


def test_bucketing_keeps_order_and_flushes_before_readers():
    from funcgrad.core import ClosedJaxpr, Eqn, Jaxpr, ShapedArray, Var
    f32 = np.dtype(np.float32)
    a, b, c, d = (Var(ShapedArray((4,), f32)) for _ in range(4))
    pa, pb, pc, r = (Var(ShapedArray((4,), f32)) for _ in range(4))
    params = {"axis_name": ("data",)}
    eqns = [Eqn(lax.psum_p, [a], [pa], params), Eqn(lax.psum_p, [b], [pb], params),
            Eqn(lax.sin_p, [pa], [r], {}), Eqn(lax.psum_p, [c], [pc], params)]
    closed = ClosedJaxpr(Jaxpr([], [a, b, c, d], [r, pb, pc], eqns), [])
    out = bucketing.bucket_collectives(closed, bucket_bytes=1 << 20).jaxpr.eqns
    assert [e.prim.name for e in out] == ["psum", "sin", "psum"]
    assert out[0].invars == [a, b] and out[2].invars == [c]
    assert bucketing.bucket_collectives(ClosedJaxpr(Jaxpr([], [a], [a], []), [])).jaxpr.eqns == []


# --- the CUDA path: NCCL calls against a stub (no GPU on this machine) ------------------------

class _Stream:
    count = 0

    def __init__(self, non_blocking=False, log=None):
        _Stream.count += 1
        self.ptr = 1000 + _Stream.count
        self.log = log

    def record(self):
        self.log.append(("record", self.ptr))
        return ("event", self.ptr)

    def wait_event(self, event):
        self.log.append(("wait", self.ptr, event))


class _FakeCupy:
    """numpy standing in for cupy: arrays live in host memory, streams only log."""

    def __init__(self):
        self.log = []
        compute = _Stream(log=self.log)
        log = self.log

        class cuda:
            Stream = staticmethod(lambda non_blocking=False: _Stream(non_blocking, log))
            get_current_stream = staticmethod(lambda: compute)
        self.cuda = cuda
        self.compute = compute

    def __getattr__(self, name):
        return getattr(np, name)


class _FakeNccl:
    """A one-rank NCCL: copies send to receive buffers through their addresses."""

    def __init__(self):
        self.calls = []
        outer = self

        class NcclCommunicator:
            def __init__(self, n, uid, rank):
                outer.calls.append(("init", n, uid, rank))

            def allReduce(self, send, recv, count, dtype, op, stream):
                outer.calls.append(("allReduce", count, dtype, op, stream))
                outer.copy(send, recv, count, dtype)

            def allGather(self, send, recv, count, dtype, stream):
                outer.calls.append(("allGather", count, dtype, stream))
                outer.copy(send, recv, count, dtype)

            def reduceScatter(self, send, recv, count, dtype, op, stream):
                outer.calls.append(("reduceScatter", count, dtype, op, stream))
                outer.copy(send, recv, count, dtype)
        self.NcclCommunicator = NcclCommunicator

    def get_unique_id(self):
        return (7,) * 4

    def groupStart(self):
        self.calls.append(("groupStart",))

    def groupEnd(self):
        self.calls.append(("groupEnd",))

    @staticmethod
    def copy(send, recv, count, dtype):
        ctype = {7: ctypes.c_float, 2: ctypes.c_int32}[dtype]
        src = np.ctypeslib.as_array((ctype * count).from_address(send))
        np.ctypeslib.as_array((ctype * count).from_address(recv))[:] = src


def test_nccl_collectives_against_a_stub_communicator():
    from funcgrad.backends.cuda import collectives as cc
    world = fg.distributed.initialize()
    xp, nccl = _FakeCupy(), _FakeNccl()
    axis = cc.NcclAxis(world, xp, nccl)
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(4, dtype=np.int32)
    ra, rb = axis.all_reduce([a, b], "sum")
    _allclose(ra, a), _allclose(rb, b)
    assert nccl.calls[0] == ("init", 1, (7,) * 4, 0)
    s = axis.stream.ptr
    assert nccl.calls[1:] == [("groupStart",), ("allReduce", 6, 7, 0, s), ("allReduce", 4, 2, 0, s),
                              ("groupEnd",)]
    c = xp.compute.ptr  # the comm stream waits for compute, then compute waits for the comm
    assert xp.log == [("record", c), ("wait", s, ("event", c)), ("record", s),
                      ("wait", c, ("event", s))]
    _allclose(axis.all_gather(a), a[None])
    _allclose(axis.reduce_scatter(a[None], "max"), a)
    assert nccl.calls[-1] == ("reduceScatter", 6, 7, cc.NCCL_OPS["max"], s)


def test_cuda_library_calls_stage_through_host_without_nccl():
    from funcgrad.backends.cuda import collectives as cc
    from funcgrad.backends.cuda import runtime
    Mesh(("data",))
    assert runtime.LIBRARY["psum"] is cc.LIBRARY["psum"]
    a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.int32)
    out = runtime.LIBRARY["psum"](np, a, b, axis_name=("data",))
    _allclose(out[0], a), _allclose(out[1], b)
    g = runtime.LIBRARY["all_gather"](np, a, axis_name=("data",), axis=1, tiled=True, axis_size=1)
    _allclose(g, a)
    assert int(runtime.LIBRARY["axis_index"](np, axis_name=("data",))) == 0


# --- several processes ------------------------------------------------------------------------

def _mpiexec():
    near = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return near if os.path.exists(near) else shutil.which("mpiexec")


def _require_mpi():
    missing = [what for what, ok in (("mpi4py", importlib.util.find_spec("mpi4py")),
                                     ("mpiexec", _mpiexec())) if not ok]
    if missing:
        why = f"needs {' and '.join(missing)} (pip install funcgrad[distributed])"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"multi-process tests {why}; CI must run them")
        pytest.skip(why)


def _session_pids(sid):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry))
    return pids


def _kill_session(sid):
    """SIGTERM, then SIGKILL, every process of session `sid` (the launcher's own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _session_pids(sid)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while _session_pids(sid) and time.monotonic() < deadline:
            time.sleep(0.05)


def run_mpi(n, args, timeout=90, runner=True):
    """Launch `mpiexec -n n python [-m mpi4py] args...`: (returncode, stdout, stderr, seconds)."""
    _require_mpi()
    launcher = _mpiexec()
    flags = []
    version = subprocess.run([launcher, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version or "prte" in version.lower():
        flags = ["--oversubscribe"]
    cmd = [launcher, *flags, "-n", str(n), sys.executable, *(["-m", "mpi4py"] if runner else []),
           *args]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", UCX_TLS="self,sm",
               NCCL_SOCKET_IFNAME="lo", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,sm", OMPI_MCA_pml="ob1",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=REPO, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"`{' '.join(cmd)}` did not finish in {timeout} s\n{out}\n{err}")
    finally:
        _kill_session(proc.pid)
    assert not _session_pids(proc.pid), "a process of the MPI job survived its cleanup"
    return proc.returncode, out, err, time.monotonic() - start


def _worker(n, scenario, **kw):
    rc, out, err, _ = run_mpi(n, [os.path.abspath(__file__), scenario], **kw)
    assert rc == 0, f"{scenario} at n={n} failed (rc={rc})\n{out}\n{err}"
    assert out.count(f"OK {scenario}") == n, out + err
    return out


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_and_training_across_processes(n):
    _worker(n, "collectives")


def test_mismatched_shapes_across_processes_are_an_error_on_every_process():
    out = _worker(2, "bad_shapes")
    assert "rank 0: args[0]: f32[3,2]" in out and "rank 1: args[0]: f32[4,2]" in out


def test_replicated_arguments_that_differ_name_the_leaf():
    out = _worker(2, "bad_replicated")
    assert "args[0]['b']: ranks [1] hold a different value than rank 0" in out
    assert "params['b']: ranks [1]" in out


def test_a_raising_process_aborts_the_job_promptly():
    # plain `python` (no `-m mpi4py`): initialize()'s excepthook must abort the job
    rc, out, err, seconds = run_mpi(2, [os.path.abspath(__file__), "raises"], timeout=60,
                                    runner=False)
    assert rc != 0
    assert "boom on rank 1" in err and "aborting all 2 processes" in err, err
    assert seconds < 30


@pytest.mark.parametrize("n", [2, 4])
def test_data_parallel_example_matches_one_process(n):
    rc, out, err, _ = run_mpi(n, ["examples/data_parallel_digits.py", "--epochs", "2"],
                              timeout=120)
    assert rc == 0, out + err
    assert f"{n} process(es)" in out and "MATCH (float32 rounding)" in out, out + err


# --- the worker side (run by mpiexec) ---------------------------------------------------------

def _scenario_collectives():
    mesh = Mesh(("data",))
    r, n = fg.distributed.process_index(), fg.distributed.process_count()
    rng = np.random.default_rng(0)  # the same numbers on every process
    xs = rng.normal(size=(n, 2 * n, 3)).astype(np.float32)
    ys = rng.normal(size=(n, 3, n)).astype(np.float32)
    f = shard_map(_every_collective, mesh, in_specs=P("data"), out_specs=P("data"))
    oracle = fg.vmap(_every_collective, axis_name="data")(xs, ys)
    want = fg.tree_util.tree_leaves(oracle)
    for result in (f(xs[r], ys[r]), fg.jit(f)(xs[r], ys[r])):
        for a, b in zip(fg.tree_util.tree_leaves(result), want):  # float16: summed in f32
            _allclose(a, np.asarray(b)[r], rtol=2e-3 if a.dtype == np.float16 else 1e-6)
    assert int(fg.jit(f)(xs[r], ys[r])["index"]) == r

    # replicated and per-process losses: the mean and the sum of the per-process gradients
    w, _ = _data_parallel_problem()
    data = rng.normal(size=(n, 5, 6)).astype(np.float32)
    for reduce, combine in ((lambda v: lax.pmean(v, "data"), np.mean), (lambda v: v, np.sum)):
        step = shard_map(fg.grad(lambda p, x, reduce=reduce: reduce(_local_loss(p, x))), mesh,
                         in_specs=(P(), P("data")), out_specs=P())
        per = [fg.grad(_local_loss)(w, x) for x in data]
        for g in (step(w, data[r]), fg.jit(step)(w, data[r])):
            for k in w:
                _allclose(g[k], combine([np.asarray(q[k]) for q in per], 0))
    # jit inside the shard_map, and grad outside it (eagerly and jitted)
    mean_loss = lambda p, x: lax.pmean(_local_loss(p, x), "data")
    inner = shard_map(fg.grad(fg.jit(mean_loss)), mesh, (P(), P("data")), P())
    outer = fg.grad(lambda p: shard_map(mean_loss, mesh, (P(), P("data")), P())(p, data[r]))
    mean = {k: np.mean([np.asarray(q[k]) for q in per], 0) for k in w}
    for g in (inner(w, data[r]), fg.jit(inner)(w, data[r]), outer(w), fg.jit(outer)(w)):
        for k in w:
            _allclose(g[k], mean[k])
    case_b = shard_map(fg.grad(lambda x, v: (v * lax.psum(x, "data")).sum()), mesh, P("data"),
                       P("data"))
    _allclose(case_b(fnp.full(1, r + 1.0), fnp.full(1, 2.0 * r - 1.0)), [n * (n - 1) - n])

    # a few training steps: identical on every process, equal to the emulation and to one
    # process on the full batch, with the allreduces bucketed, one per array, or all in one
    def loss(p, x):
        return lax.pmean(_local_loss(p, x), "data")

    def sgd(p, x):
        g = fg.grad(loss)(p, x)
        return {k: p[k] - 0.5 * g[k] for k in p}

    def full_batch(p, x):
        g = fg.grad(_local_loss)(p, x)
        return {k: p[k] - 0.5 * g[k] for k in p}
    batches = rng.normal(size=(3, n, 5, 6)).astype(np.float32)
    results = []
    for bucket in (4 << 20, 0, 1 << 30):
        fg.config.update("collective_bucket_bytes", bucket)
        step = fg.jit(shard_map(sgd, mesh, in_specs=(P(), P("data")), out_specs=P()))
        p = w
        for b in batches:
            p = step(p, b[r])
        fg.distributed.check_replicated(p, "params")
        results.append(p)
    fg.config.update("collective_bucket_bytes", 4 << 20)
    emulated, single = w, w
    for b in batches:
        emulated = fg.vmap(sgd, in_axes=(None, 0), out_axes=None, axis_name="data")(emulated, b)
        single = fg.jit(full_batch)(single, b.reshape(n * 5, 6))
    for p in results:
        for k in w:
            np.testing.assert_array_equal(np.asarray(p[k]), np.asarray(results[0][k]))
            _allclose(p[k], emulated[k], rtol=1e-6)
            _allclose(p[k], single[k], rtol=1e-5)


def _scenario_bad_shapes():
    mesh = Mesh(("data",))
    r = fg.distributed.process_index()
    f = shard_map(lambda x: lax.psum(x, "data"), mesh, in_specs=P("data"), out_specs=P())
    for g in (f, fg.jit(f)):
        try:
            g(np.ones((3 + r, 2), np.float32))
        except errors.FuncgradValueError as e:
            print(e)
        else:
            raise AssertionError("no error for mismatched shapes")
    # compiled for equal shapes first; then process 1 alone retraces for a new shape
    g = fg.jit(f)
    _allclose(g(np.ones((3, 2), np.float32)), float(mesh.size))
    try:
        g(np.ones((3 + r, 2), np.float32))
    except errors.FuncgradValueError as e:
        assert "different argument shapes" in str(e)
    else:
        raise AssertionError("no error after a retrace on one process")


def _scenario_bad_replicated():
    mesh = Mesh(("data",))
    r = fg.distributed.process_index()
    params = {"a": np.ones(2, np.float32), "b": np.full(2, 1.0 + (r > 0), np.float32)}
    f = shard_map(lambda p, x: lax.psum(x * p["a"] * p["b"], "data"), mesh,
                  in_specs=(P(), P("data")), out_specs=P(), check_rep=True)
    for g in (f, fg.jit(f)):
        try:
            g(params, np.ones(2, np.float32))
        except errors.FuncgradValueError as e:
            print(e)
        else:
            raise AssertionError("no error for differing replicated arguments")
    try:
        fg.distributed.check_replicated(params, "params")
    except errors.FuncgradValueError as e:
        print(e)
    else:
        raise AssertionError("check_replicated passed")
    same = fg.distributed.broadcast(params)
    fg.distributed.check_replicated(same, "params")
    _allclose(fg.jit(f)(same, np.ones(2, np.float32)), float(mesh.size))


def _scenario_raises():
    mesh = Mesh(("data",))
    if fg.distributed.process_index() == 1:
        raise RuntimeError("boom on rank 1")
    f = shard_map(lambda x: lax.psum(x, "data"), mesh, in_specs=P("data"), out_specs=P())
    f(np.ones(3, np.float32))  # rank 0 waits here until the abort ends it


if __name__ == "__main__":
    scenario = sys.argv[1]
    globals()[f"_scenario_{scenario}"]()
    print(f"OK {scenario}", flush=True)
