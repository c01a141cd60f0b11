"""Control flow nested 100 deep (cond, scan, while_loop) works eagerly, under jit and vmap, and
under grad (beyond JAX 0.10.2, which raises RecursionError there); funcgrad's own frames per
nesting level are not charged to the user's recursion limit (`core.nesting`), splitting a
nested cond for reverse mode costs polynomial work (not 2^depth), and a compile asks for each
sub-program once."""

import inspect
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.native import build
from funcgrad.compiler import pipeline
from funcgrad.interpreters import partial_eval as pe
from funcgrad.test_util import check_grads


def nested_cond(depth):
    def f(x):
        if depth == 0:
            return fnp.sin(x) * 2.0
        return lax.cond(x > -1e9, nested_cond(depth - 1), lambda y: -y, x + 0.01)
    return f


def nested_scan(depth):
    def f(x):
        if depth == 0:
            return fnp.sin(x)
        inner = nested_scan(depth - 1)
        return lax.scan(lambda c, _: (inner(c) + 0.1 * c, None), x, None, length=1)[0]
    return f


def nested_while(depth):
    def f(x):
        if depth == 0:
            return x + 1.0
        inner = nested_while(depth - 1)
        return lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, inner(c[1])), (0, x))[1]
    return f


def reference(kind, depth, x):
    """The nested functions in plain Python."""
    if depth == 0:
        return {"cond": 2 * np.sin(x), "scan": np.sin(x), "while": x + 1.0}[kind]
    if kind == "cond":
        return reference(kind, depth - 1, x + 0.01)
    inner = reference(kind, depth - 1, x)
    return inner + 0.1 * x if kind == "scan" else inner


NESTED = {"cond": nested_cond, "scan": nested_scan, "while": nested_while}


@pytest.mark.parametrize("kind", ["cond", "scan", "while"])
def test_a_hundred_levels_run_eagerly_and_under_jit_and_vmap(kind):
    f, want = NESTED[kind](100), reference(kind, 100, 0.5)
    np.testing.assert_allclose(f(0.5), want, rtol=1e-5)
    np.testing.assert_allclose(fg.jit(f)(0.5), want, rtol=1e-5)
    xs = np.array([0.5, 0.25], np.float32)
    np.testing.assert_allclose(fg.vmap(f)(xs), [want, reference(kind, 100, 0.25)], rtol=1e-5)


def test_grad_and_jit_of_grad_through_deep_nesting():
    # (100 levels work too, in seconds: splitting for reverse mode is quadratic in depth)
    x = 0.3
    np.testing.assert_allclose(fg.grad(nested_cond(40))(x), 2 * np.cos(x + 0.4), rtol=1e-5)
    np.testing.assert_allclose(fg.jit(fg.grad(nested_cond(10)))(x), 2 * np.cos(x + 0.1),
                               rtol=1e-5)
    for grad, depth in ((fg.grad(nested_scan(40)), 40), (fg.jit(fg.grad(nested_scan(20))), 20)):
        # each scan level adds 0.1 * c: d/dx = cos(x) + 0.1 * depth
        np.testing.assert_allclose(grad(x), np.cos(x) + 0.1 * depth, rtol=1e-5)


def test_funcgrad_frames_are_not_charged_to_the_users_recursion_limit():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 150)  # 150 frames left to the user's code
    try:
        grad = fg.grad(nested_cond(40))(0.3)  # some 600 funcgrad frames deep
        jitted = fg.jit(nested_while(40))(0.3)
    finally:
        sys.setrecursionlimit(limit)
    np.testing.assert_allclose(grad, 2 * np.cos(0.7), rtol=1e-5)
    np.testing.assert_allclose(jitted, 1.3, rtol=1e-6)
    assert sys.getrecursionlimit() == limit


def test_runaway_recursion_through_funcgrad_still_stops():
    def forever(x):
        return lax.cond(x > 0, forever, forever, x)
    limit = sys.getrecursionlimit()
    with pytest.raises(RecursionError):
        forever(1.0)
    assert sys.getrecursionlimit() == limit


def test_residuals_of_deeply_nested_scans_keep_few_axes():
    # each level stacks its inner residuals once more: past 16 axes they are stored flat
    f = nested_scan(20)
    check_grads(lambda x: f(x), (np.float64(0.7),), order=1, modes=("rev",))
    jaxpr = str(fg.make_jaxpr(fg.grad(f))(0.7))
    assert "f32[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1" not in jaxpr


def test_splitting_a_nested_cond_costs_polynomial_work(monkeypatch):
    calls = []
    split = pe._partial_eval
    monkeypatch.setattr(pe, "_partial_eval", lambda *a: calls.append(1) or split(*a))
    counts = []
    for depth in (8, 16):
        calls.clear()
        fg.grad(nested_cond(depth))(0.3)
        counts.append(len(calls))
    assert counts[1] < 5 * counts[0], counts  # quadratic: 4x; it was 2^depth: 256x


@pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")
def test_native_compile_asks_for_each_sub_program_once():
    fg.config.update("native", "sync")
    compiles = []
    for depth in (4, 8):
        before = pipeline.stats["compiles"]
        np.testing.assert_allclose(fg.jit(nested_cond(depth))(0.5),
                                   reference("cond", depth, 0.5), rtol=1e-6)
        compiles.append(pipeline.stats["compiles"] - before)
    assert compiles[1] <= 2 * compiles[0] + 2, compiles  # one per program: it was 2^depth
