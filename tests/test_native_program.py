"""A program on the native tier is one C function (issue 27 items 2, 4 and 5):

- the C compiler runs once per program, nested loops included (their bodies come fused from
  the pipeline and print inside their loops);
- the issue-27 programs (and the loop and optimizer programs already ahead of JAX) run as
  one call into C, no Python statement between their operations, counted at run time, with
  the numbers of the numpy backend and of eager evaluation;
- `coverage.py`'s table answers for every primitive, and every primitive it lists with a C
  form prints in C;
- `np.matmul` in C (`matmul.py`) has numpy's bits for every layout numpy reads, and views
  feeding products, kernels, routines and results (transposes, slices, broadcasts, reshapes
  numpy must copy) give the numpy backend's bits;
- `memory.pack` never lets two buffers that are alive together share a byte.
"""

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import blas, build, cnode, coverage, ops
from funcgrad.backends.native.matmul import Matmul
from funcgrad.backends.native.views import View
from funcgrad.compiler import memory, pipeline
from tests.test_native_backend import assert_same, native_mode, needs_cc
from tests.test_primitive_coverage import PRIMITIVES

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _benchmarks():
    sys.path.insert(0, BENCH)
    try:
        import bench_native_programs
        import programs_small
    finally:
        sys.path.remove(BENCH)
    return programs_small, bench_native_programs


def _native(fn, args, donate=()):
    closed = fg.make_jaxpr(fn)(*args)
    with native_mode():
        return closed, pipeline.compile_jaxpr(closed, backend="cpu", donate_argnums=donate)


# --- the compiler runs once --------------------------------------------------------------

@needs_cc
def test_the_c_compiler_runs_once_for_a_program_with_nested_loops(monkeypatch, tmp_path):
    # a scan over a fori_loop over a while_loop, with a cond in the innermost body: before,
    # each body went through the pipeline and the compiler on its own (4 compiles more)
    monkeypatch.setattr(build, "_memory", {})
    runs, run = [], build._run_compiler

    def counting(cc, source, out, work_fd):
        runs.append(source)
        return run(cc, source, out, work_fd)
    monkeypatch.setattr(build, "_run_compiler", counting)
    w = np.linspace(-1, 1, 16).astype(np.float32).reshape(4, 4)

    def nested(x):
        def inner(c):
            c = lax.cond(fnp.sum(c) > 0, lambda c: c * 0.5, lambda c: c - 0.25, c)
            return fnp.tanh(c @ w)
        def outer(i, c):
            return lax.while_loop(lambda d: fnp.max(fnp.abs(d)) > 0.3, inner, c) + 0.5
        return lax.scan(lambda c, _: (lax.fori_loop(0, 3, outer, c), fnp.sum(c)), x, None,
                        length=4)
    x = np.linspace(0.1, 1, 8).astype(np.float32).reshape(2, 4)
    before = pipeline.stats["compiles"]
    closed = fg.make_jaxpr(nested)(x)
    with native_mode(native_cache_dir=str(tmp_path)):
        exe = pipeline.compile_jaxpr(closed, backend="cpu")
    programs = [s for s in runs if "fg_run0" in s]  # (the pool and Ctrl-C runtimes aside)
    assert len(programs) == 1, f"{len(programs)} program modules compiled"
    assert programs[0].count("loop */") == 3 and "branches */" not in programs[0]
    assert pipeline.stats["compiles"] - before == 1  # no body compiled apart
    assert exe.c_calls == 1 and exe.python_ops == []
    assert_same(exe(x), pipeline.compile_jaxpr(closed, backend="numpy")(x))


# --- the benchmark programs: one call into C ---------------------------------------------

SMALL = ["gp7", "logjoint", "advivmap", "maml", "mnist", "cnn"]
AHEAD = ["ilqr", "rnn", "adam"]
EXACT = {"adam"}  # native == numpy backend bit for bit (the others: libm ulps, sums in double)


def _spec(name):
    small, bench = _benchmarks()
    spec = small.SPECS[name]() if name in small.SPECS else getattr(bench, name + "_spec")()
    return spec, bench.namespace("funcgrad")


@needs_cc
@pytest.mark.parametrize("name", SMALL + AHEAD)
def test_a_benchmark_program_is_one_call_into_c(name):
    (make, args, donate, _, _), L = _spec(name)
    fn = make(L)
    leaves = [np.asarray(a) for a in fg.tree_util.tree_leaves(args)]
    closed, exe = _native(fn, args)
    assert exe.python_ops == [] and exe.c_calls == 1, exe.python_ops
    calls = []
    g = exe._fn.__globals__
    seg = g["_fg0"]
    g["_fg0"] = lambda *a: calls.append(1) or seg(*a)
    got = exe(*[a.copy() for a in leaves])
    g["_fg0"] = seg
    assert len(calls) == 1
    ref = pipeline.compile_jaxpr(closed, backend="numpy")(*[a.copy() for a in leaves])
    eager = fg.tree_util.tree_leaves(fn(*fg.tree_util.tree_map(fnp.asarray, args)))
    for k, (a, b, e) in enumerate(zip(got, ref, eager)):
        if name in EXACT:
            assert_same([a], [b])
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5, err_msg=f"{name} output {k}")
        np.testing.assert_allclose(b, np.asarray(e), rtol=2e-4, atol=1e-5,
                                   err_msg=f"{name} output {k} (eager)")


# --- the per-primitive table -------------------------------------------------------------

def test_every_primitive_has_one_native_form():
    forms = {coverage.VIEW, coverage.MATMUL, coverage.ROUTINE, coverage.LOOP, coverage.PYTHON}
    for p in PRIMITIVES:
        if p.fusible and p.kind in ("elementwise", "reduction"):
            continue  # inside kernels (ops.NativeC.unfused lists what is not)
        form, detail = coverage.form(p)
        assert form in forms and detail, p.name
        if form == coverage.PYTHON:
            assert isinstance(detail, str) and detail != "no C form yet" or p.kind in (
                "higher-order",), f"{p.name}: say why it has no C form"


def _samples():
    """Programs holding every primitive the table lists with a C form (within its limits),
    by primitive name."""
    r = np.random.default_rng(0)
    a = r.normal(size=(4, 6)).astype(np.float32)
    spd = (a @ a.T + 4 * np.eye(4)).astype(np.float32)
    idx = np.array([[0], [2], [1]], np.int32)

    def shapes(x, m):
        y = lax.rev(x.T, (0,))[1:5:2] + lax.broadcast_in_dim(x[0, :2], (2, 2), (1,)).sum()
        z = lax.pad(x, 0.0, ((1, 0, 0), (0, 1, 1)))
        c = lax.concatenate([x, x * 2], 0)
        d = lax.dynamic_slice(x, (1, 2), (2, 2))
        u = lax.dynamic_update_slice(x, d * 0, (0, 0))
        g = x[idx[:, 0]]
        s = x.at[idx[:, 0]].add(1.0)
        t = x.at[idx[:, 0]].set(2.0)
        b = lax.bitcast_convert_type(x, np.int32)
        return (y, z, c, u, g, s, t, b, lax.squeeze(x[:1], (0,)), x.reshape(6, 4) @ m.T)

    def along(x):
        return (fnp.argmax(x, 1), fnp.argmin(x, 0), fnp.cumsum(x, 1), fnp.cumprod(x, 0),
                lax.cummax(x, 1), lax.cummin(x, 0), fnp.sort(x, 1), lax.top_k(x, 2)[0])

    def linalg(s, b):
        lu = fnp.linalg.solve(s, b)
        ch = fnp.linalg.cholesky(s)
        return lu, ch, fg.scipy.linalg.solve_triangular(ch, b, lower=True)

    def windows(x):
        def f(x):
            y = lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
            z = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")
            y = y.sum() + lax.reduce_window_max(x, (1, 2, 2, 1), (1, 2, 2, 1)).sum() \
                - lax.reduce_window_min(x, (1, 2, 2, 1), (1, 2, 2, 1)).sum()
            w = lax.conv_general_dilated(x, np.ones((3, 3, 2, 2), np.float32), (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            return y.sum() + z.sum() + (w * w).sum()
        return fg.value_and_grad(f)(x)

    def loops(x):
        s = lax.scan(lambda c, v: (c + v, c * v), x[0], x)[0]
        w = lax.while_loop(lambda c: c[0] < 3.0, lambda c: c + 1.0, x[0])
        return s, w, lax.cond(x[0, 0] > 0, lambda v: v + 1, lambda v: v - 1, x)
    return [(shapes, (a, a.T.copy())), (along, (a,)), (linalg, (spd, a[:, :2].copy())),
            (windows, (r.normal(size=(1, 6, 6, 2)).astype(np.float32),)), (loops, (a,))]


@needs_cc
def test_every_primitive_listed_with_a_c_form_prints_in_c():
    seen = set()
    for fn, args in _samples():
        closed, exe = _native(fn, args)
        assert exe.python_ops == [], (fn.__name__, exe.python_ops)
        assert_same(exe(*args), pipeline.compile_jaxpr(closed, backend="numpy")(*args)) \
            if fn.__name__ in ("shapes", "along", "loops") else None
        seen |= {e.prim.name for e in _all_eqns(exe.program)}
    listed = {p.name for p in PRIMITIVES if not (p.fusible and p.kind in (
        "elementwise", "reduction")) and coverage.form(p)[0] != coverage.PYTHON}
    assert listed <= seen, f"no sample for {sorted(listed - seen)}"


def _all_eqns(program):
    """The equations of a fused program's calls and of its loops' bodies."""
    from funcgrad.core import ClosedJaxpr
    out = []
    for node in program.nodes:
        eqn = getattr(node, "eqn", None)
        if eqn is None:
            continue
        out.append(eqn)
        stack = [v for v in eqn.params.values() if isinstance(v, (ClosedJaxpr, tuple))]
        while stack:
            v = stack.pop()
            if isinstance(v, tuple):
                stack += [b for b in v if isinstance(b, ClosedJaxpr)]
                continue
            out += v.jaxpr.eqns
            stack += [p for e in v.jaxpr.eqns for p in e.params.values()
                      if isinstance(p, (ClosedJaxpr, tuple))]
    return out


# --- np.matmul in C, views -----------------------------------------------------------------

def _operand(r, shape, dt, kind):
    """(base array, numpy view of it, the same `View`) of a matmul operand laid out as
    `kind`: c(ontiguous), t(ransposed), s(liced rows) or b(roadcast rows)."""
    if kind == "c":
        base = r.normal(size=shape).astype(dt)
        return base, base, View.contiguous(shape, dt)
    if kind == "t":
        st = shape[:-2] + (shape[-1], shape[-2])
        base = r.normal(size=st).astype(dt)
        perm = tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2)
        return base, base.transpose(perm), View.contiguous(st, dt).transpose(perm)
    if kind == "s":
        big = shape[:-1] + (shape[-1] + 3,)
        base = r.normal(size=big).astype(dt)
        lo = [0] * (len(shape) - 1) + [1]
        hi = list(shape[:-1]) + [1 + shape[-1]]
        return base, base[tuple(slice(a, b) for a, b in zip(lo, hi))], \
            View.contiguous(big, dt).slice(lo, hi)
    small = shape[:-2] + (1, shape[-1])
    base = r.normal(size=small).astype(dt)
    return base, np.broadcast_to(base, shape), View.contiguous(small, dt).broadcast(shape)


@needs_cc
@pytest.mark.skipif(not blas.functions(), reason="numpy without its OpenBLAS: no C matmul")
def test_np_matmul_in_c_has_numpys_bits_for_every_layout():
    import ctypes
    r = np.random.default_rng(5)
    cases, fns = [], []
    for dt in (np.float32, np.float64):
        for k in range(48):
            m, n, p = (int(v) for v in r.integers(1, 9 if k % 4 else 40, size=3))
            batch = (int(r.integers(1, 4)),) if k % 3 == 0 else ()
            ka, kb = "ctsb"[k % 4], "ctsb"[(k // 4) % 4]
            A, Av, va = _operand(r, batch + (m, n), dt, ka)
            B, Bv, vb = _operand(r, batch + (n, p), dt, kb)
            mm = Matmul(va, vb, dt, f"fg_mm{len(fns)}")
            fns.append(mm.function())
            cases.append((A, B, Av, Bv, va, vb, mm))
        A, _, va = _operand(r, (7, 5), dt, "c")  # a matrix times its own transpose: syrk
        mm = Matmul(va, va.transpose((1, 0)), dt, f"fg_mm{len(fns)}")
        fns.append(mm.function())
        cases.append((A, A, A, A.T, va, va.transpose((1, 0)), mm))
    lib = build.load(cnode.Module(fns, ops.PRELUDE).source())
    methods = set()
    for k, (A, B, Av, Bv, va, vb, mm) in enumerate(cases):
        got = np.empty(mm.out_shape, A.dtype)
        getattr(lib, f"fg_mm{k}")(ctypes.c_void_p(A.ctypes.data + va.offset * A.itemsize),
                                   ctypes.c_void_p(B.ctypes.data + vb.offset * B.itemsize),
                                   ctypes.c_void_p(got.ctypes.data))
        assert_same([got], [np.matmul(Av, Bv)])
        methods.add(mm.method.split()[0])
    assert {"gemm", "gemv", "its"} <= methods  # numpy's three paths met


@st.composite
def _view_chains(draw):
    """A chain of view operations on a (4, 6) array ending in a product, a kernel, a routine
    (a triangular solve) and a result."""
    ops_ = draw(st.lists(st.sampled_from(["T", "slice", "rev", "bcast", "reshape"]),
                         min_size=1, max_size=4))
    return ops_


@needs_cc
@settings(max_examples=8, deadline=None)
@given(_view_chains())
def test_views_feeding_c_give_the_numpy_backends_bits(chain):
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)

    def f(x):
        y = x
        for op in chain:
            if op == "T":
                y = y.T
            elif op == "slice":
                y = y[::2] if y.shape[0] > 2 else y[:, 1:]
            elif op == "rev":
                y = lax.rev(y, (0,))
            elif op == "bcast":
                y = lax.broadcast_in_dim(y, (2,) + y.shape, (1, 2)).reshape(
                    (2 * y.shape[0],) + y.shape[1:])
            else:
                y = y.reshape(y.shape[::-1]) if y.ndim == 2 else y
        prod = y @ y.T
        tri = fg.scipy.linalg.solve_triangular(
            fnp.tril(prod) + 10 * fnp.eye(prod.shape[0]), y, lower=True)
        return prod, y * 2.0 - 1.0, tri, y
    closed, exe = _native(f, (x,))
    assert exe.python_ops == []
    got, want = exe(x), pipeline.compile_jaxpr(closed, backend="numpy")(x)
    assert_same([got[0], got[1], got[3]], [want[0], want[1], want[3]])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)  # C vs LAPACK


# --- the workspace -------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(0, 20), st.integers(0, 6)),
                min_size=1, max_size=30))
def test_packed_buffers_alive_together_never_share_a_byte(blocks):
    sizes = [s for s, _, _ in blocks]
    lifetimes = [(a, a + d) for _, a, d in blocks]
    offsets, total = memory.pack(sizes, lifetimes)
    for i in range(len(sizes)):
        assert offsets[i] % 16 == 0 and offsets[i] + sizes[i] <= total
        for j in range(i):
            meet = lifetimes[i][0] <= lifetimes[j][1] and lifetimes[j][0] <= lifetimes[i][1]
            apart = offsets[i] + sizes[i] <= offsets[j] or offsets[j] + sizes[j] <= offsets[i]
            assert not meet or apart, (i, j)
    steps = range(min(a for a, _ in lifetimes), max(b for _, b in lifetimes) + 1)
    most = max(sum(s for s, (a, b) in zip(sizes, lifetimes) if a <= t <= b) for t in steps)
    assert total >= most
