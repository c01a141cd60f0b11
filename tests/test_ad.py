"""Autodiff end to end: the transforms agree with each other and with finite differences,
nested derivatives do not confuse perturbations, define-by-run control flow, tuple outputs,
errors, golden printed IR, flat memory over a long eager loop, and debug_nans."""

import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.core import Builder, Tracer
from funcgrad.test_util import check_grads
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten


@pytest.fixture
def x64():
    fg.config.update("enable_x64", True)
    yield
    fg.config.update("enable_x64", False)


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def rand(*shape, seed=0):
    return fnp.asarray(np.random.default_rng(seed).standard_normal(shape))


# --- (1) composition stress test ----------------------------------------------------------------

def poly(x):
    return 3.0 * x ** 3 - 2.0 * x ** 2 + x - 5.0


def sin_exp(x):
    return fnp.sin(fnp.exp(fnp.cos(x)) * x) * fnp.exp(-x * x)


def mlp_loss(params, x, labels):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    m = fnp.max(logits, axis=-1, keepdims=True)
    log_probs = logits - m - fnp.log(fnp.sum(fnp.exp(logits - m), axis=-1, keepdims=True))
    return -fnp.mean(fnp.sum(log_probs * labels, axis=-1))


def mlp_params(seed=0):
    return {"w1": rand(3, 4, seed=seed), "b1": rand(4, seed=seed + 1),
            "w2": rand(4, 3, seed=seed + 2), "b2": rand(3, seed=seed + 3)}


def mlp_data():
    labels = np.eye(3)[[0, 2, 1, 2, 0]]
    return rand(5, 3, seed=11), fnp.asarray(labels)


def tuple_out(x):
    return fnp.sin(x) * x, fnp.sum(fnp.exp(x)), x[::-1] * 2.0


def _ravel(tree):
    leaves, treedef = tree_flatten(tree)
    shapes = [np.shape(leaf) for leaf in leaves]
    flat = fnp.concatenate([fnp.ravel(leaf) for leaf in leaves])

    def unravel(v):
        out, i = [], 0
        for s in shapes:
            n = int(np.prod(s, dtype=int))
            out.append(fnp.reshape(v[i:i + n], s))
            i += n
        return tree_unflatten(treedef, out)
    return flat, unravel


def _scalarize(f):
    """A scalar function of the same arguments: a fixed random projection of all outputs."""
    def s(*args):
        leaves = tree_flatten(f(*args))[0]
        return sum(fnp.sum(leaf * rand(*np.shape(leaf), seed=7 + i))
                   for i, leaf in enumerate(leaves))
    return s


def _fd_hessian(s_flat, v, eps=1e-5):
    g = fg.grad(s_flat)
    cols = []
    for j in range(v.shape[0]):
        e = np.zeros(v.shape[0])
        e[j] = eps
        cols.append((np.asarray(g(v + e)) - np.asarray(g(v - e))) / (2 * eps))
    return np.stack(cols, axis=1)


CASES = {
    "poly": (poly, lambda: (rand(3),)),
    "sin_exp": (sin_exp, lambda: (rand(3, seed=1),)),
    "mlp": (lambda p: mlp_loss(p, *mlp_data()), lambda: (mlp_params(),)),
    "tuple": (tuple_out, lambda: (rand(3, seed=2),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transforms_agree(name, x64):
    f, make_args = CASES[name]
    (arg,) = make_args()
    check_grads(f, (arg,), order=2)
    s = _scalarize(f)
    v, unravel = _ravel(arg)
    s_flat = lambda v: s(unravel(v))
    # grad, vjp, jvp, jacfwd, jacrev give the same first derivative
    g = _ravel(fg.grad(s)(arg))[0]
    out, f_vjp = fg.vjp(s, arg)
    close(out, s(arg))
    close(_ravel(f_vjp(fnp.asarray(1.0))[0])[0], g)
    close(fg.jacrev(s_flat)(v), g)
    close(fg.jacfwd(s_flat)(v), g)
    eye = np.eye(v.shape[0])
    close(np.array([float(fg.jvp(s_flat, (v,), (fnp.asarray(e),))[1]) for e in eye]), g)
    # second derivatives: hessian == jacfwd(jacrev) == jacrev(jacfwd) == jacrev(jacrev) == FD
    h = np.asarray(fg.hessian(s_flat)(v))
    close(h, h.T)
    close(fg.jacfwd(fg.jacrev(s_flat))(v), h)
    close(fg.jacrev(fg.jacfwd(s_flat))(v), h)
    close(fg.jacrev(fg.jacrev(s_flat))(v), h)
    close(h, _fd_hessian(s_flat, v), 1e-5)
    # grad(grad) along a direction: d^T H d
    d = np.asarray(rand(v.shape[0], seed=5))
    line = lambda t: s_flat(v + t * fnp.asarray(d))
    close(fg.grad(fg.grad(line))(0.0), d @ h @ d)
    # the pytree-of-pytrees layout of the hessian of the original function
    if name == "mlp":
        hp = fg.hessian(s)(arg)
        keys = sorted(arg)
        assert hp["w1"]["b2"].shape == (3, 4, 3)
        blocks = [[np.asarray(hp[a][b]).reshape(np.size(arg[a]), np.size(arg[b]))
                   for b in keys] for a in keys]
        close(np.block(blocks), h)


def test_jacobian_layouts_with_tuple_outputs_and_argnums():
    x, y = rand(3), rand(2, seed=1)

    def f(x, y):
        return {"a": fnp.outer(x, y), "b": fnp.sum(x) * y}
    jf = fg.jacfwd(f, argnums=(0, 1))(x, y)
    jr = fg.jacrev(f, argnums=(0, 1))(x, y)
    assert jf["a"][0].shape == (3, 2, 3) and jf["a"][1].shape == (3, 2, 2)
    assert jf["b"][0].shape == (2, 3) and jf["b"][1].shape == (2, 2)
    for k in ("a", "b"):
        for i in range(2):
            close(jf[k][i], jr[k][i], 1e-5)
    close(jf["b"][1], np.sum(np.asarray(x)) * np.eye(2), 1e-5)


def test_jacobian_has_aux_and_errors():
    x = rand(3)
    j, aux = fg.jacrev(lambda x: (fnp.sin(x), {"n": fnp.sum(x)}), has_aux=True)(x)
    close(j, np.diag(np.cos(np.asarray(x))), 1e-5)
    close(aux["n"], np.sum(np.asarray(x)), 1e-5)
    assert not isinstance(aux["n"], Tracer)
    h, aux2 = fg.hessian(lambda x: (fnp.sum(x ** 3), x * 2.0), has_aux=True)(x)
    close(h, np.diag(6.0 * np.asarray(x)), 1e-4)
    close(aux2, 2.0 * np.asarray(x), 1e-6)
    with pytest.raises(errors.FuncgradTypeError, match="jacfwd requires real-valued inputs.*"
                                                       "argument 0"):
        fg.jacfwd(lambda n: n * 2)(fnp.arange(3))
    with pytest.raises(errors.FuncgradTypeError, match="jacrev requires real-valued outputs"):
        fg.jacrev(lambda x: (x > 0).astype(fnp.int32))(x)


# --- (2) perturbation confusion ------------------------------------------------------------------

def test_perturbation_confusion():
    assert float(fg.grad(lambda x: x * fg.grad(lambda y: x * y)(1.0))(2.0)) == 4.0
    # d/dx [x * d/dy (x + y)] = 1: the inner derivative must not see x's perturbation
    assert float(fg.grad(lambda x: x * fg.grad(lambda y: x + y)(1.0))(3.0)) == 1.0
    close(fg.jacfwd(lambda x: x * fg.jacrev(lambda y: x * y)(1.0))(2.0), 4.0)


# --- (3) define-by-run ----------------------------------------------------------------------------

def branchy(v):
    if v > 0.5:
        return fnp.sin(v) * v
    return v ** 3


def test_python_control_flow_under_eager_grad():
    close(fg.grad(branchy)(1.0), np.cos(1.0) + np.sin(1.0))
    close(fg.grad(branchy)(0.2), 3 * 0.04)
    close(fg.grad(fg.grad(branchy))(0.2), 6 * 0.2)
    n = 0
    x = fnp.asarray(3.0)
    while x > 1.0:  # loops on values of the primal work too
        x = x / 2.0
        n += 1
    assert n == 2


def test_control_flow_under_make_jaxpr_names_the_line():
    with pytest.raises(errors.ConcretizationTypeError) as e:
        fg.make_jaxpr(branchy)(1.0)
    msg = str(e.value)
    assert "test_ad.py" in msg and "if v > 0.5:" in msg and "make_jaxpr" in msg
    with pytest.raises(errors.ConcretizationTypeError, match="if v > 0.5"):
        fg.make_jaxpr(fg.grad(branchy))(1.0)


# --- (4) tuple outputs and multiple-output primitives ---------------------------------------------

def test_selected_component_sends_zero_to_the_others():
    def f(x):
        return x * 2.0, fnp.sqrt(x)  # sqrt'(0) = inf: a materialized zero ct would give NaN

    fg.config.update("debug_nans", True)
    assert float(fg.grad(lambda x: f(x)[0])(0.0)) == 2.0
    out, f_vjp = fg.vjp(f, 4.0)
    close(f_vjp((fnp.asarray(0.0), fnp.asarray(1.0)))[0], 0.25)
    fg.config.update("debug_nans", False)
    ct = f_vjp((fnp.asarray(1.0), fnp.asarray(0.0)))[0]
    close(ct, 2.0)


def test_multiple_output_primitive_routes_cotangents():
    keys = fnp.array([3.0, 1.0, 2.0])
    vals = fnp.array([10.0, 20.0, 30.0])

    def f(k, v):
        sk, sv = lax.sort((k, v), num_keys=1)
        return fnp.sum(sk * fnp.array([1.0, 2.0, 3.0])) + fnp.sum(sv * fnp.array([4.0, 5.0, 6.0]))
    gk, gv = fg.grad(f, argnums=(0, 1))(keys, vals)
    # sorted order is indices [1, 2, 0]
    close(gk, [3.0, 1.0, 2.0])
    close(gv, [6.0, 4.0, 5.0])
    values, idx = lax.top_k(keys, 2)
    g = fg.grad(lambda k: fnp.sum(lax.top_k(k, 2)[0] * fnp.array([1.0, 10.0])))(keys)
    close(g, [1.0, 0.0, 10.0])

    two = fg.checkpoint(lambda x: (fnp.sin(x), fnp.cos(x)))  # a two-output equation
    close(fg.grad(lambda x: two(x)[1])(0.5), -np.sin(0.5))
    close(fg.grad(lambda x: two(x)[0] * two(x)[1])(0.5), np.cos(1.0))


# --- (5) grad errors ------------------------------------------------------------------------------

def test_grad_error_messages():
    with pytest.raises(errors.FuncgradTypeError, match="scalar output.*f32\\[3\\]"):
        fg.grad(lambda x: x * 2.0)(fnp.ones(3))
    with pytest.raises(TypeError, match="argument 0\\['n'\\].*int32"):
        fg.grad(lambda p: p["w"] * p["n"])({"w": 1.0, "n": fnp.array(2)})
    with pytest.raises(errors.FuncgradTypeError, match="has_aux=True requires .* pair"):
        fg.grad(lambda x: x * 2.0, has_aux=True)(1.0)
    with pytest.raises(errors.FuncgradTypeError, match="cotangent leaf 0 has shape \\(2,\\) "
                                                       "but the output has shape \\(3,\\)"):
        _, f_vjp = fg.vjp(fnp.sin, fnp.ones(3))
        f_vjp(fnp.ones(2))
    with pytest.raises(errors.FuncgradTypeError, match="structure"):
        _, f_vjp = fg.vjp(lambda x: (x, x), fnp.ones(3))
        f_vjp(fnp.ones(3))


def test_grad_has_aux_returns_values():
    g, aux = fg.grad(lambda x: (fnp.sum(x ** 2), {"m": fnp.mean(x)}), has_aux=True)(rand(3))
    assert not isinstance(aux["m"], Tracer)


# --- (6) golden printed IR ------------------------------------------------------------------------

GOLDEN = {
    "sin_times_x": (lambda x: fnp.sin(x) * x, (1.0,), (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = sin a\n"
        "    c:f32[] = mul b a\n"
        "    d:f32[] = cos a\n"
        "    e:f32[] = mul b 1.0:f32[]\n"
        "    f:f32[] = mul 1.0:f32[] a\n"
        "    g:f32[] = mul f d\n"
        "    h:f32[] = add_any e g\n"
        "  in (h,) }")),
    "sum_tanh": (lambda x: fnp.sum(fnp.tanh(x)), (np.ones(3, np.float32),), (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = tanh a\n"
        "    c:f32[] = reduce_sum[axes=(0,)] b\n"
        "    d:f32[3] = sub 1.0:f32[] b\n"
        "    e:f32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] 1.0:f32[]\n"
        "    f:f32[3] = mul e d\n"
        "    g:f32[3] = mul f b\n"
        "    h:f32[3] = add_any f g\n"
        "  in (h,) }")),
    "broadcast_scale": (lambda x, y: fnp.sum(fnp.exp(x) * y),
                        (np.ones(3, np.float32), np.float32(2.0)), (
        "{ lambda ; a:f32[3] b:f32[]. let\n"
        "    c:f32[3] = exp a\n"
        "    d:f32[3] = mul c b\n"
        "    e:f32[] = reduce_sum[axes=(0,)] d\n"
        "    f:f32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] 1.0:f32[]\n"
        "    g:f32[3] = mul c f\n"
        "    h:f32[] = reduce_sum[axes=(0,)] g\n"
        "    i:f32[3] = mul f b\n"
        "    j:f32[3] = mul i c\n"
        "  in (j, h) }")),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_grad_ir(name):
    f, args, want = GOLDEN[name]
    args = tuple(fnp.asarray(a) for a in args)
    got = str(fg.make_jaxpr(fg.grad(f, argnums=tuple(range(len(args)))))(*args))
    assert got == want, f"printed IR changed:\n{got}"


# --- (7) memory -----------------------------------------------------------------------------------

def _rss_kb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4


def _live_builders():
    return [o for o in gc.get_objects() if type(o) is Builder]


def test_long_eager_training_keeps_memory_flat():
    rng = np.random.default_rng(0)
    params = {"w1": fnp.asarray(rng.standard_normal((8, 16)).astype(np.float32) * 0.3),
              "b1": fnp.zeros(16),
              "w2": fnp.asarray(rng.standard_normal((16, 3)).astype(np.float32) * 0.3),
              "b2": fnp.zeros(3)}
    x = fnp.asarray(rng.standard_normal((16, 8)).astype(np.float32))
    labels = fnp.asarray(np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)])
    grad_fn = fg.grad(mlp_loss)

    def step(p):
        g = grad_fn(p, x, labels)
        return tree_map(lambda a, b: a - 0.1 * b, p, g)

    first_loss = float(mlp_loss(params, x, labels))
    for _ in range(100):  # warm-up: caches (dtype tables, source lines) fill here
        params = step(params)
    rss0 = _rss_kb()
    for _ in range(800):
        params = step(params)
    rss_growth = _rss_kb() - rss0
    gc.collect()
    tracemalloc.start()  # slows each step several times: the last 100 steps only
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(100):
        params = step(params)
    gc.collect()
    growth = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert growth < 50_000, f"traced memory grew by {growth} bytes over 100 steps"
    assert rss_growth < 20_000, f"RSS grew by {rss_growth} KiB over 800 steps"
    assert float(mlp_loss(params, x, labels)) < first_loss
    assert not _live_builders()


def test_no_builder_survives_a_grad():
    refs = []

    def f(x):
        refs.append(weakref.ref(x._trace))
        return fnp.sum(fnp.sin(x) * x)
    g = fg.grad(f)(fnp.ones(3))
    h = fg.hessian(f)(fnp.ones(3))
    v = fg.vmap(fg.grad(f))(fnp.ones((2, 3)))
    del g, h, v
    gc.collect()
    assert refs and all(r() is None for r in refs)
    assert not _live_builders()


# --- (8) higher derivatives -----------------------------------------------------------------------

def test_third_derivative():
    f = lambda x: fnp.sin(x) * x ** 2
    # f''' = -x^2 cos x - 6x sin x + 6 cos x
    x = 0.7
    want = -x * x * np.cos(x) - 6 * x * np.sin(x) + 6 * np.cos(x)
    close(fg.grad(fg.grad(fg.grad(f)))(x), want, 1e-5)
    close(fg.jacfwd(fg.jacfwd(fg.jacrev(f)))(x), want, 1e-5)
    close(fg.jacrev(fg.hessian(f))(x), want, 1e-5)


def test_mlp_hessian_matches_finite_differences(x64):
    params = mlp_params(3)
    data = mlp_data()
    v, unravel = _ravel(params)
    s_flat = lambda v: mlp_loss(unravel(v), *data)
    h = np.asarray(fg.hessian(s_flat)(v))
    close(h, _fd_hessian(s_flat, v), 1e-5)


# --- (9) tracer leaks -----------------------------------------------------------------------------

def test_tracer_leak_error():
    leaked = []

    def f(x):
        leaked.append(x)
        return fnp.sum(x * 2.0)
    fg.grad(f)(fnp.ones(2))
    with pytest.raises(errors.TracerLeakError) as e:
        fnp.sin(leaked[0])
    msg = str(e.value)
    assert "tracer leak" in msg and "already finished" in msg and "f32[2]" in msg
    assert "test_ad.py" in msg and "hint" in msg
    with pytest.raises(errors.TracerLeakError):
        fg.grad(lambda y: fnp.sum(leaked[0] * y))(1.0)


# --- debug_nans -----------------------------------------------------------------------------------

def test_debug_nans_names_forward_primitive_and_line():
    fg.config.update("debug_nans", True)

    def f(x):
        y = fnp.log(x)
        return y * 0.0  # -inf * 0 = NaN in the forward pass
    with pytest.raises(FloatingPointError, match="primitive mul produced a NaN") as e:
        fg.grad(f)(0.0)
    assert "return y * 0.0" in str(e.value)


def test_debug_nans_names_backward_primitive_and_line():
    def f(x):
        y = fnp.exp(x)  # exp(100) = inf; the forward value exp(-inf) = 0 is fine
        return fnp.exp(-y)
    assert float(f(100.0)) == 0.0
    assert np.isnan(float(fg.grad(f)(100.0)))
    fg.config.update("debug_nans", True)
    with pytest.raises(FloatingPointError, match="primitive mul produced a NaN") as e:
        fg.grad(f)(100.0)
    assert "y = fnp.exp(x)" in str(e.value)


# --- inputs of the transforms: canonical Arrays out, non-arrays an error naming the leaf ------

@pytest.mark.parametrize("how", ["vjp", "vjp_fn", "jvp", "jvp_tangent", "linearize",
                                 "linearize_fn", "jacfwd", "jacrev"])
def test_an_output_that_is_an_input_comes_back_as_a_canonical_array(how):
    x = np.arange(3.0)  # float64: float32 without x64, as every other output
    ident = lambda x: x
    out = {"vjp": lambda: fg.vjp(ident, x)[0], "vjp_fn": lambda: fg.vjp(ident, x)[1](x)[0],
           "jvp": lambda: fg.jvp(ident, (x,), (x,))[0],
           "jvp_tangent": lambda: fg.jvp(ident, (x,), (x,))[1],
           "linearize": lambda: fg.linearize(ident, x)[0],
           "linearize_fn": lambda: fg.linearize(ident, x)[1](x),
           "jacfwd": lambda: fg.jacfwd(ident)(x), "jacrev": lambda: fg.jacrev(ident)(x)}[how]()
    assert type(out) is fg.Array and out.dtype == np.float32
    want = np.eye(3) if how.startswith("jac") else x
    np.testing.assert_array_equal(np.asarray(out), want)


@pytest.mark.parametrize("call, names", [
    (lambda: fg.grad(lambda x, y: x)(1.0, "s"), None),  # not differentiated: no error
    (lambda: fg.grad(lambda x: x)("s"), "grad: argument 0 is not an array: str"),
    (lambda: fg.vjp(lambda x: x, {"w": "s"}), "vjp: primals[0]['w'] is not an array: str"),
    (lambda: fg.vjp(lambda x: x, 1.0)[1]("s"), "vjp function: cotangent is not an array: str"),
    (lambda: fg.jvp(lambda x: x, ("s",), (1.0,)), "jvp: primals[0] is not an array: str"),
    (lambda: fg.jvp(lambda x: x, (1.0,), (object(),)),
     "jvp: tangents[0] is not an array: object"),
    (lambda: fg.linearize(lambda x: x, [1.0, "s"]),
     "linearize: primals[0][1] is not an array: str"),
    (lambda: fg.jacfwd(lambda x, y: y, argnums=1)(1.0, ("s",)),
     "jacfwd: argument 1[0] is not an array: str"),
    (lambda: fg.jacrev(lambda x: x)({"k": "s"}), "jacrev: argument 0['k'] is not an array: str"),
])
def test_a_leaf_that_is_no_array_is_an_error_naming_the_transform_and_its_path(call, names):
    if names is None:
        call()
        return
    with pytest.raises(errors.FuncgradTypeError) as e:
        call()
    assert names in str(e.value) and "test_ad.py" in str(e.value) and "hint:" in str(e.value)
