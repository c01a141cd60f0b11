"""Control flow (lax.cond, switch, while_loop, fori_loop, scan, map): values against Python
loops, derivatives with check_grads, vmap against loops, jit against eager (and the generated
source has real loops and branches), composition of transforms, partial evaluation, the
printed IR, and the error messages."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.core import Array, eval_jaxpr
from funcgrad.interpreters.partial_eval import partial_eval_jaxpr
from funcgrad.test_util import check_grads
from funcgrad.tree_util import tree_flatten, tree_map


def rnd(*shape, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return fnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32))


def close(got, want, rtol=1e-5, atol=1e-6):
    g, w = tree_flatten(got)[0], tree_flatten(want)[0]
    assert len(g) == len(w)
    for a, b in zip(g, w):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def stack(outs):
    return tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


def loop_vs_vmap(f, args, in_axes, size):
    """vmap(f) against a Python loop over the mapped axis (axis 0 or None per argument)."""
    take = lambda a, ax, i: a if ax is None else tree_map(lambda x: np.asarray(x)[i], a)
    want = stack([f(*[take(a, ax, i) for a, ax in zip(args, in_axes)]) for i in range(size)])
    close(fg.vmap(f, in_axes=in_axes)(*args), want)
    close(fg.jit(fg.vmap(f, in_axes=in_axes))(*args), want)


def generated(jitted, *args):
    return jitted.lower(*args).compile().as_text()


# --- programs used by several tests ---------------------------------------------------------------

def rnn(W, h0, xs):
    def step(h, x):
        h = fnp.tanh(h @ W + x)
        return h, (h ** 2).sum()
    h, ys = lax.scan(step, h0, xs)
    return h.sum() + ys.sum()


def rnn_loop(W, h0, xs):
    h, total = np.asarray(h0), 0.0
    for x in np.asarray(xs):
        h = np.tanh(h @ np.asarray(W) + x)
        total += (h ** 2).sum()
    return h.sum() + total


def nested(W, xs):
    """An outer scan over rows whose body runs an inner scan whose body has a cond."""
    def outer(c, row):
        def inner(h, x):
            h = lax.cond(x > 0, lambda h: fnp.tanh(h @ W) + x, lambda h: fnp.sin(h) * x, h)
            return h, h.sum()
        h, ys = lax.scan(inner, c, row)
        return h * 0.9, (ys ** 2).sum()
    c, ys = lax.scan(outer, fnp.ones(3), xs)
    return c.sum() + ys.sum()


def nested_loop(W, xs):
    W, c, total = np.asarray(W), np.ones(3, np.float32), 0.0
    for row in np.asarray(xs):
        h, acc = c, 0.0
        for x in row:
            h = np.tanh(h @ W) + x if x > 0 else np.sin(h) * x
            acc += h.sum() ** 2
        c, total = h * 0.9, total + acc
    return c.sum() + total


# --- values against Python references -------------------------------------------------------------

def test_scan_values_pytrees_and_reverse():
    xs = {"a": rnd(5, 2), "b": rnd(5, seed=1)}

    def f(carry, x):
        s, n = carry
        s = s * 0.5 + x["a"] * x["b"]
        return (s, n + 1), {"s": s, "sum": s.sum()}
    for reverse in (False, True):
        (s, n), ys = lax.scan(f, (fnp.zeros(2), 0), xs, reverse=reverse)
        order = range(4, -1, -1) if reverse else range(5)
        ref_s, ref_ys = np.zeros(2, np.float32), [None] * 5
        for i in order:
            ref_s = ref_s * 0.5 + np.asarray(xs["a"][i]) * np.asarray(xs["b"][i])
            ref_ys[i] = ref_s
        close(s, ref_s)
        assert int(n) == 5 and ys["s"].shape == (5, 2) and ys["sum"].shape == (5,)
        close(ys["s"], np.stack(ref_ys))
        close(ys["sum"], np.stack(ref_ys).sum(1))


def test_scan_without_xs_length_zero_and_map():
    c, ys = lax.scan(lambda c, _: (c * 2, c), 1.0, None, length=4)
    close(c, 16.0)
    close(ys, np.array([1.0, 2.0, 4.0, 8.0]))
    c, ys = lax.scan(lambda c, x: (c + x, c * x), fnp.ones(3), fnp.zeros((0, 3)))
    close(c, np.ones(3))
    assert ys.shape == (0, 3)
    close(lax.map(lambda x: (x ** 2).sum(), rnd(4, 3)), (np.asarray(rnd(4, 3)) ** 2).sum(1))
    close(lax.map(lambda t: t[0] * t[1], (fnp.arange(3.0), fnp.arange(3.0))),
          np.array([0.0, 1.0, 4.0]))


def test_scan_weak_init_takes_the_carry_dtype():
    c, _ = lax.scan(lambda c, x: (c + x, None), 0, fnp.arange(4.0))
    assert c.dtype == np.float32 and float(c) == 6.0


def test_cond_and_switch_values():
    x = rnd(3)
    assert np.allclose(lax.cond(True, fnp.sin, fnp.cos, x), np.sin(np.asarray(x)))
    assert np.allclose(lax.cond(0, fnp.sin, fnp.cos, x), np.cos(np.asarray(x)))
    out = lax.cond(x.sum() > 100, lambda a, b: {"s": a + b}, lambda a, b: {"s": a - b}, x, 2.0)
    close(out["s"], np.asarray(x) - 2.0)
    branches = [lambda v: v, lambda v: 2 * v, lambda v: 3 * v]
    for i, k in [(-5, 0), (0, 0), (1, 1), (2, 2), (7, 2)]:  # the index is clamped
        close(lax.switch(i, branches, x), (k + 1) * np.asarray(x))
    close(lax.switch(3, [lambda v: v + 1], x), np.asarray(x) + 1)
    assert lax.cond(True, lambda v: v, lambda v: 0, 1.5).dtype == np.float32  # weak promotes


def test_cond_eagerly_runs_only_the_branch_taken():
    fg.config.update("debug_nans", True)  # the other branch would produce a NaN
    assert float(lax.cond(-1.0 > 0, fnp.log, lambda v: v * 2, -1.0)) == -2.0
    assert float(fg.grad(lambda v: lax.cond(v > 0, fnp.log, lambda u: u * 2, v))(-1.0)) == 2.0


def test_while_and_fori_values():
    assert int(lax.while_loop(lambda v: v < 100, lambda v: v * 3, 1)) == 243
    v, n = lax.while_loop(lambda c: c[1] < 4, lambda c: (fnp.sqrt(c[0]), c[1] + 1),
                          (fnp.asarray(65536.0), 0))
    assert float(v) == 2.0 and int(n) == 4
    assert int(lax.fori_loop(2, 7, lambda i, s: s + i, 0)) == 20
    assert int(lax.fori_loop(5, 2, lambda i, s: s + i, 0)) == 0
    traced = fg.jit(lambda lo, hi: lax.fori_loop(lo, hi, lambda i, s: s + i * i, 0))
    assert int(traced(1, 5)) == 30
    tree = lax.fori_loop(0, 3, lambda i, t: {"a": t["a"] * 2, "b": t["b"] + i}, {"a": 1.0,
                                                                                  "b": 0})
    assert float(tree["a"]) == 8.0 and int(tree["b"]) == 3


def test_nested_program_values():
    W, xs = rnd(3, 3, scale=0.5), rnd(4, 5, seed=1)
    close(nested(W, xs), nested_loop(W, xs), rtol=1e-4)
    close(rnn(W, rnd(3, seed=2), rnd(6, 3, seed=3)),
          rnn_loop(W, rnd(3, seed=2), rnd(6, 3, seed=3)), rtol=1e-5)


@given(st.integers(0, 6), st.booleans(), st.integers(1, 3))
def test_scan_matches_loop_property(length, reverse, width):
    xs, c0 = rnd(length, width, seed=length), rnd(width, seed=9)

    def f(c, x):
        c = fnp.sin(c) + x
        return c, c * 2
    c, ys = lax.scan(f, c0, xs, reverse=reverse)
    ref_c, ref_ys = np.asarray(c0), np.zeros((length, width), np.float32)
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        ref_c = np.sin(ref_c) + np.asarray(xs)[i]
        ref_ys[i] = ref_c * 2
    close(c, ref_c)
    close(ys, ref_ys)
    close(fg.jit(lambda c0, xs: lax.scan(f, c0, xs, reverse=reverse))(c0, xs), (ref_c, ref_ys))


# --- derivatives ----------------------------------------------------------------------------------

def test_scan_grads_order_2():
    check_grads(rnn, (rnd(3, 3, scale=0.5), rnd(3, seed=1), rnd(4, 3, seed=2)), order=2)

    def rev(c0, xs):
        c, ys = lax.scan(lambda c, x: (c * fnp.cos(x), c + x), c0, xs, reverse=True)
        return c, ys
    check_grads(rev, (rnd(2), rnd(3, 2, seed=3)), order=2)


def test_cond_and_switch_grads_order_2():
    def f(x, y):
        return lax.cond(x.sum() > 0, lambda a, b: fnp.sin(a) * b, lambda a, b: a * b ** 2, x, y)
    x, y = rnd(3), rnd(3, seed=1)
    check_grads(f, (x, y), order=2)
    check_grads(f, (-x * x - 1.0, y), order=2)
    branches = [fnp.sin, lambda v: v ** 3, fnp.exp]
    for i in (0, 1, 2):
        check_grads(lambda v, i=i: lax.switch(i, branches, v), (x,), order=2)


def test_fori_static_is_reverse_differentiable():
    f = lambda x: lax.fori_loop(0, 4, lambda i, v: fnp.sin(v) * i + v, x)
    check_grads(f, (rnd(3),), order=2)


def test_while_forward_mode_only():
    def f(x):
        return lax.while_loop(lambda c: c[1] < 3, lambda c: (fnp.sin(c[0]) * 1.5, c[1] + 1),
                              (x, 0))[0]
    check_grads(f, (rnd(3),), order=2, modes=("fwd",))
    assert fg.jacfwd(f)(rnd(3)).shape == (3, 3)
    with pytest.raises(errors.FuncgradTypeError) as e:
        fg.grad(lambda x: f(x).sum())(rnd(3))
    msg = str(e.value)
    assert "while_loop" in msg and "lax.scan" in msg and "fori_loop" in msg
    assert "test_control_flow.py" in msg and "(fnp.sin(c[0]) * 1.5" in msg


def test_nested_grads_and_grad_inside_jit():
    W, xs = rnd(3, 3, scale=0.5), rnd(3, 4, seed=1)
    check_grads(nested, (W, xs), order=1)
    g = fg.grad(nested, argnums=(0, 1))(W, xs)
    close(fg.jit(fg.grad(nested, argnums=(0, 1)))(W, xs), g, rtol=1e-5)
    close(fg.grad(fg.jit(nested), argnums=(0, 1))(W, xs), g, rtol=1e-5)


def test_linearize_jacrev_hessian_through_scan():
    W, h0, xs = rnd(3, 3, scale=0.5), rnd(3, seed=1), rnd(4, 3, seed=2)
    out, f_jvp = fg.linearize(lambda w: rnn(w, h0, xs), W)
    close(f_jvp(W), fg.jvp(lambda w: rnn(w, h0, xs), (W,), (W,))[1], rtol=1e-5)
    close(fg.jacrev(lambda h: rnn(W, h, xs))(h0), fg.jacfwd(lambda h: rnn(W, h, xs))(h0),
          rtol=1e-4)
    assert fg.hessian(lambda h: rnn(W, h, xs))(h0).shape == (3, 3)


@pytest.mark.parametrize("cell", ["checkpoint", "jit", "custom_jvp"])
def test_grad_of_scan_over_other_higher_order_primitives(cell):
    base = lambda h, x, W: fnp.tanh(h @ W + x)
    if cell == "checkpoint":
        wrapped = fg.checkpoint(base)
    elif cell == "jit":
        wrapped = fg.jit(base)
    else:
        wrapped = fg.custom_jvp(base)
        wrapped.defjvp(lambda p, t: (base(*p), fg.jvp(base, p, t)[1]))

    def f(W, h0, xs, cell_fn):
        return lax.scan(lambda h, x: (cell_fn(h, x, W), h.sum()), h0, xs)[1].sum()
    args = (rnd(3, 3, scale=0.5), rnd(3, seed=1), rnd(4, 3, seed=2))
    want = fg.grad(f)(*args, base)
    close(fg.grad(f)(*args, wrapped), want, rtol=1e-5)
    close(fg.jit(fg.grad(f), static_argnums=3)(*args, wrapped), want, rtol=1e-5)


# --- batching -------------------------------------------------------------------------------------

def test_vmap_scan_batched_carry_xs_and_consts():
    W, hb, xsb = rnd(3, 3, scale=0.5), rnd(4, 3, seed=1), rnd(4, 5, 3, seed=2)
    f = lambda W, h0, xs: lax.scan(lambda h, x: (fnp.tanh(h @ W + x), h.sum()), h0, xs)
    loop_vs_vmap(f, (W, hb, xsb), (None, 0, 0), 4)
    loop_vs_vmap(f, (rnd(4, 3, 3, seed=3), hb[0], xsb[0]), (0, None, None), 4)
    loop_vs_vmap(f, (W, hb[0], xsb), (None, None, 0), 4)
    got = fg.vmap(f, in_axes=(None, 0, 1))(W, hb, np.swapaxes(np.asarray(xsb), 0, 1))
    close(got, fg.vmap(f, in_axes=(None, 0, 0))(W, hb, xsb))


def test_vmap_cond_switch_and_batched_predicates():
    f = lambda p, x: lax.cond(p > 0, lambda v: v * 2, fnp.sin, x)
    ps, xs = rnd(5, seed=1), rnd(5, 3, seed=2)
    loop_vs_vmap(f, (ps, xs), (0, 0), 5)
    loop_vs_vmap(f, (ps, xs[0]), (0, None), 5)
    loop_vs_vmap(f, (ps[0], xs), (None, 0), 5)
    g = lambda i, x: lax.switch(i, [lambda v: v, lambda v: v * 2, lambda v: -v], x)
    idx = fnp.asarray(np.array([-1, 0, 1, 2, 3], np.int32))
    loop_vs_vmap(g, (idx, xs), (0, 0), 5)
    loop_vs_vmap(g, (idx, xs[0]), (0, None), 5)
    source = generated(fg.jit(fg.vmap(f)), ps, xs)
    assert "if " not in source  # a batched predicate selects instead of branching


def test_vmap_while_batched_predicate_freezes_finished_lanes():
    f = lambda x, n: lax.while_loop(lambda c: c[1] < n, lambda c: (c[0] * 1.5 + 1, c[1] + 1),
                                    (x, 0))
    ns = fnp.asarray(np.array([0, 1, 4, 2, 3], np.int32))
    loop_vs_vmap(f, (rnd(5, 2), ns), (0, 0), 5)
    loop_vs_vmap(f, (rnd(5, 2), 3), (0, None), 5)
    loop_vs_vmap(lambda x, n: lax.fori_loop(0, n, lambda i, v: v + i * x, x),
                 (rnd(5, 2), ns), (0, 0), 5)
    jf = lambda x: lax.while_loop(lambda c: c[1] < 3, lambda c: (fnp.sin(c[0]), c[1] + 1),
                                  (x, 0))[0]
    close(fg.vmap(fg.jacfwd(jf))(rnd(2, 3)), stack([fg.jacfwd(jf)(x) for x in rnd(2, 3)]))


def test_transform_compositions_against_loops():
    W, hb, xsb = rnd(3, 3, scale=0.5), rnd(4, 3, seed=1), rnd(4, 5, 3, seed=2)
    per = [fg.grad(rnn)(W, hb[i], xsb[i]) for i in range(4)]
    close(fg.vmap(fg.grad(rnn), in_axes=(None, 0, 0))(W, hb, xsb), stack(per), rtol=1e-4)
    close(fg.jit(fg.vmap(fg.grad(rnn), in_axes=(None, 0, 0)))(W, hb, xsb), stack(per),
          rtol=1e-4)
    total = lambda W: fg.vmap(rnn, in_axes=(None, 0, 0))(W, hb, xsb).sum()
    close(fg.grad(total)(W), np.sum(stack(per), 0), rtol=1e-4)
    close(fg.vmap(fg.jit(rnn), in_axes=(None, 0, 0))(W, hb, xsb),
          np.array([rnn_loop(W, hb[i], xsb[i]) for i in range(4)]), rtol=1e-5)
    cf = lambda p, x: lax.cond(p > 0, lambda v: v * 2, fnp.sin, x)
    ps, xs = rnd(2, 3, seed=4), rnd(2, 3, 2, seed=5)
    close(fg.vmap(fg.vmap(cf))(ps, xs), stack([stack([cf(ps[i, j], xs[i, j]) for j in range(3)])
                                               for i in range(2)]))


# --- jit ------------------------------------------------------------------------------------------

def test_jit_emits_real_loops_and_branches():
    W, h0, xs = rnd(3, 3, scale=0.5), rnd(3, seed=1), rnd(50, 3, seed=2)
    jr = fg.jit(rnn)
    close(jr(W, h0, xs), rnn(W, h0, xs), rtol=1e-5)
    src = generated(jr, W, h0, xs)
    assert "for i0 in range(50):" in src and src.count("\n") < 40  # not unrolled
    jg = fg.jit(fg.grad(rnn))
    close(jg(W, h0, xs), fg.grad(rnn)(W, h0, xs), rtol=1e-5)
    assert "range(49, -1, -1)" in generated(jg, W, h0, xs)  # the reverse scan
    cf = fg.jit(lambda x: lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x))
    x = rnd(3)
    for v in (x, -x):
        close(cf(v), v * 2 if float(v.sum()) > 0 else -v)
    assert "if " in generated(cf, x) and "else:" in generated(cf, x)
    sw = fg.jit(lambda i, x: lax.switch(i, [fnp.sin, fnp.cos, fnp.exp], x))
    for i in range(-1, 4):
        close(sw(i, x), lax.switch(i, [fnp.sin, fnp.cos, fnp.exp], x))
    assert "elif " in generated(sw, 1, x)
    wl = fg.jit(lambda x: lax.while_loop(lambda v: v.sum() < 100, lambda v: v * 2, x))
    close(wl(fnp.ones(3)), np.full(3, 64.0))
    assert "while " in generated(wl, fnp.ones(3))
    close(fg.jit(nested)(W, rnd(3, 4, seed=3)), nested(W, rnd(3, 4, seed=3)), rtol=1e-5)


def test_jit_scan_with_zero_length_and_closures():
    W = rnd(2, 2)
    f = fg.jit(lambda c, xs: lax.scan(lambda c, x: (c @ W + x, c), c, xs))
    c0 = rnd(2, seed=1)
    c, ys = f(c0, fnp.zeros((0, 2)))
    close(c, c0)
    assert ys.shape == (0, 2)
    close(f(c0, rnd(3, 2, seed=2)), lax.scan(lambda c, x: (c @ W + x, c), c0, rnd(3, 2, seed=2)))


def test_codegen_skips_unused_outputs_and_constant_branches():
    f = fg.jit(lambda xs: lax.scan(lambda c, x: (c + x, (fnp.exp(c), c)), 0.0, xs)[1][1])
    xs = fnp.arange(3.0)
    close(f(xs), np.array([0.0, 0.0, 1.0]))
    src = generated(f, xs)
    assert src.count("np.empty") == 1 and "t0, = body" in src and "t1" not in src
    g = fg.jit(lambda x: lax.cond(True, fnp.sin, fnp.cos, x))
    close(g(1.0), np.sin(1.0))
    assert "if " not in generated(g, 1.0)


# --- partial evaluation ---------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["scan", "cond"])
def test_partial_eval_splits_into_known_and_unknown(which):
    if which == "scan":
        def f(w, x):
            return lax.scan(lambda c, xi: (fnp.sin(c) * w + xi, c * w), x, fnp.ones((3, 2)))
    else:
        def f(w, x):
            return lax.cond(w.sum() > 0, lambda a, b: (a * b, fnp.sin(a)),
                            lambda a, b: (a - b, fnp.cos(a)), w, x)
    w, x = rnd(2), rnd(2, seed=1)
    closed = fg.make_jaxpr(f)(w, x)
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(closed, [False, True], False)
    k_outs = eval_jaxpr(known.jaxpr, known.consts, w)
    res = k_outs[len(k_outs) - num_res:]
    u_outs = iter(eval_jaxpr(unknown.jaxpr, unknown.consts, *res, x))
    k_iter = iter(k_outs[:len(k_outs) - num_res])
    got = [next(u_outs) if u else next(k_iter) for u in out_unknowns]
    close(got, tree_flatten(f(w, x))[0])
    assert any(e.prim.name == which for e in unknown.jaxpr.eqns)


# --- the printed IR -------------------------------------------------------------------------------

GOLDEN_NESTED = """\
{ lambda ; a:f32[] b:f32[3]. let
    c:f32[] d:f32[3] = scan[jaxpr={ lambda ; e:f32[] f:f32[]. let
        g:bool[] = gt f 0.0:f32[]
        h:i32[] = convert_element_type[new_dtype=i32 weak_type=False] g
        i:f32[] = cond[branches=({ lambda ; j:f32[] k:f32[]. let l:f32[] = sub k j in (l,) } \
{ lambda ; m:f32[] n:f32[]. let o:f32[] = mul n m in (o,) })] h f e
        p:f32[] = sin i
      in (i, p) } length=3 num_carry=1 num_consts=0 reverse=False unroll=1] a b
  in (c, d) }"""


def test_golden_nested_scan_cond_ir():
    def f(x, ys):
        def body(c, y):
            c2 = lax.cond(y > 0, lambda c: c * y, lambda c: c - y, c)
            return c2, fnp.sin(c2)
        return lax.scan(body, x, ys)
    assert str(fg.make_jaxpr(f)(1.0, fnp.zeros(3))) == GOLDEN_NESTED
    text = str(fg.make_jaxpr(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0,
                                                      x))(1.0))
    assert "while[body_jaxpr={ lambda ; c:f32[]. let d:f32[] = mul c 2.0:f32[] in (d,) }" in text


def test_loop_invariant_work_is_hoisted_out_of_loops():
    W = rnd(3, 3)

    def f(h0, xs):
        return lax.scan(lambda h, x: (fnp.tanh(h @ (W @ W)) + x, h), h0, xs)
    closed = fg.make_jaxpr(f)(rnd(3), rnd(4, 3))
    assert [e.prim.name for e in closed.eqns] == ["dot_general", "scan"]
    assert "dot_general" in str(closed.eqns[1].params["jaxpr"])  # h @ (W @ W) stays inside
    grad_ir = fg.make_jaxpr(fg.grad(lambda W, h, xs: f(h, xs)[1].sum()))(W, rnd(3), rnd(4, 3))
    stacked = [v.aval.shape for e in grad_ir.eqns if e.prim.name == "scan"
               for v in e.outvars if v.aval.shape == (4, 3, 3)]
    assert not stacked  # W @ W is a loop-invariant residual, passed once, never stacked


# --- errors ---------------------------------------------------------------------------------------

def _raises(cls, fn, *fragments):
    with pytest.raises(cls) as e:
        fn()
    msg = str(e.value)
    for frag in fragments + ("test_control_flow.py",):
        assert frag in msg, (frag, msg)
    return msg


def test_cond_errors_show_both_outputs():
    x = fnp.ones(3)
    _raises(errors.FuncgradTypeError,
            lambda: lax.cond(True, lambda v: v, lambda v: v[:2], x),
            "output: f32[3] in true_fun, f32[2] in false_fun")
    _raises(errors.FuncgradTypeError,
            lambda: lax.cond(True, lambda v: {"a": v, "b": v.astype(np.int32)},
                             lambda v: {"a": v, "b": v}, x),
            "output['b']: i32[3] in true_fun, f32[3] in false_fun")
    _raises(errors.FuncgradTypeError, lambda: lax.cond(True, lambda v: (v, v), lambda v: v, x),
            "same pytree structure", "true_fun returns PyTreeDef((*, *))")
    _raises(errors.FuncgradTypeError, lambda: lax.cond(x > 0, fnp.sin, fnp.cos, x),
            "pred must be a scalar boolean, got bool[3]")
    _raises(errors.FuncgradTypeError,
            lambda: lax.switch(0, [lambda v: v, lambda v: v * 2, lambda v: v.sum()], x),
            "output: f32[3] in branches[0], f32[] in branches[2]")
    _raises(errors.FuncgradTypeError, lambda: lax.switch(0.5, [fnp.sin, fnp.cos], x),
            "index must be a scalar integer")


def test_scan_errors_name_the_carry_path():
    x = fnp.ones(3)
    _raises(errors.FuncgradTypeError,
            lambda: lax.scan(lambda c, xi: ({"h": c["h"][None]}, xi), {"h": x}, fnp.ones((4, 2))),
            "carry['h']: f32[3] in init, f32[1,3] returned by the body")
    _raises(errors.FuncgradTypeError,
            lambda: lax.scan(lambda c, xi: ((c[0].astype(np.int32), c[1]), xi), (x, x),
                             fnp.ones(4)),
            "carry[0]: f32[3] in init, i32[3] returned by the body")
    _raises(errors.FuncgradValueError,
            lambda: lax.scan(lambda c, xi: (c, xi), x, (fnp.ones((4, 2)), fnp.ones(5))),
            "xs[0]: f32[4,2] (length 4)", "xs[1]: f32[5] (length 5)")
    _raises(errors.FuncgradValueError, lambda: lax.scan(lambda c, xi: (c, xi), x, None),
            "length=")
    _raises(errors.FuncgradTypeError, lambda: lax.scan(lambda c, xi: c, x, fnp.ones(3)),
            "must return a pair (carry, y), got a single array f32[3]")
    _raises(errors.FuncgradTypeError,
            lambda: lax.fori_loop(0, 3, lambda i, v: v.astype(np.int32), x),
            "val: f32[3] in init_val, i32[3] returned by body_fun")


def test_while_errors():
    x = fnp.ones(3)
    _raises(errors.FuncgradTypeError, lambda: lax.while_loop(lambda v: v, lambda v: v + 1, x),
            "cond_fun must return a boolean scalar, but it returned f32[3]")
    _raises(errors.FuncgradTypeError,
            lambda: lax.while_loop(lambda v: (v < 1).all(), lambda v: v[None], x),
            "val: f32[3] in init_val, f32[1,3] returned by body_fun")
    _raises(errors.FuncgradTypeError,
            lambda: fg.jit(lambda v: lax.while_loop(lambda c: c.sum(), lambda c: c, v))(x),
            "returned f32[]")


def test_python_control_flow_inside_a_body_points_to_lax():
    def body(c, x):
        if x > 0:
            return c + x, c
        return c, c
    msg = _raises(errors.ConcretizationTypeError, lambda: lax.scan(body, 0.0, fnp.ones(3)),
                  "lax.cond")
    assert "if x > 0" in msg


def test_eager_grad_with_python_control_flow_around_scan():
    def f(w, xs):
        c, _ = lax.scan(lambda c, x: (c * w + x, None), 0.0, xs)
        return c * 2 if c > 0 else -c  # define-by-run: c has a value under eager grad
    xs = fnp.arange(1.0, 4.0)
    eps = 1e-3
    num = (float(f(1.1 + eps, xs)) - float(f(1.1 - eps, xs))) / (2 * eps)
    assert abs(float(fg.grad(f)(1.1, xs)) - num) < 1e-2 * abs(num)


def test_tracer_leak_through_a_body_is_reported():
    saved = []

    def body(c, x):
        saved.append(c)
        return c + x, c
    lax.scan(body, 0.0, fnp.ones(2))
    with pytest.raises(errors.TracerLeakError):
        lax.scan(lambda c, x: (c + saved[0], c), 0.0, fnp.ones(2))


def test_results_are_arrays():
    c, ys = lax.scan(lambda c, x: (c + x, c), 0.0, fnp.ones(2))
    assert type(c) is Array and type(ys) is Array
