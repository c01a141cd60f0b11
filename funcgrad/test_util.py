"""Testing helpers for users and for funcgrad's own suite: `check_grads`, `rand_like`.

`check_grads` follows `jax.test_util.check_grads`: in float64, forward mode is compared with
a central finite difference along a random direction, reverse mode with forward mode by the
inner-product identity <vjp(ct), t> == <ct, jvp(t)>, recursively up to `order`.
This module uses only the public API (`funcgrad.jvp`, `funcgrad.vjp`, `tree_util`) and numpy.
"""

import contextlib
import functools

import numpy as np

import funcgrad
from funcgrad import dtypes
from funcgrad.config import config
from funcgrad.core import Array
from funcgrad.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

EPS = 1e-4
_DEFAULT_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
                np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 2e-3,
                np.dtype(np.complex128): 1e-5}

__all__ = ["EPS", "check_batching", "check_grads", "check_jvp", "check_vjp", "numerical_jvp",
           "rand_like"]


# --- values ---------------------------------------------------------------------------------

def _np(x):
    return np.asarray(x)


def _inexact(x):
    return dtypes.kind(_np(x).dtype) in "fc"


def rand_like(rng, x):
    """A standard-normal numpy array with the shape and dtype of `x` (zeros for int/bool).

    Args:
        rng: a `numpy.random.Generator` (or an int seed).
        x: an array, tracer-free value or Python scalar giving shape and dtype.

    Example:
        >>> rand_like(np.random.default_rng(0), np.zeros(2)).shape
        (2,)
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    v = _np(x)
    if dtypes.kind(v.dtype) == "c":
        z = rng.standard_normal(v.shape) + 1j * rng.standard_normal(v.shape)
        return np.asarray(z, v.dtype)
    if dtypes.kind(v.dtype) == "f":
        return np.asarray(rng.standard_normal(v.shape), v.dtype)
    return np.zeros(v.shape, v.dtype)


def _to64(x):
    v = _np(x)
    if dtypes.kind(v.dtype) == "f":
        return Array(v.astype(np.float64))
    if dtypes.kind(v.dtype) == "c":
        return Array(v.astype(np.complex128))
    return x


def _tree_rand(rng, tree):
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [Array(rand_like(rng, x)) for x in leaves])


def _tree_conj(tree):
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [Array(np.asarray(np.conj(_np(x)))) if _inexact(x) else x
                                    for x in leaves])


def _axpy(a, xs, ys):
    """ys + a * xs leafwise (integer leaves of `ys` unchanged)."""
    xl, _ = tree_flatten(xs)
    yl, treedef = tree_flatten(ys)
    return tree_unflatten(treedef, [Array(np.asarray(_np(y) + a * _np(x))) if _inexact(y) else y
                                    for x, y in zip(xl, yl)])


def numerical_jvp(f, args, tangents, eps=EPS):
    """Central difference (f(args + eps t) - f(args - eps t)) / 2eps, as numpy leaves."""
    pos = tree_flatten(f(*_axpy(eps, tangents, args)))[0]
    neg = tree_flatten(f(*_axpy(-eps, tangents, args)))[0]
    return [(_np(p) - _np(n)) * (0.5 / eps) if _inexact(p) else np.zeros_like(_np(p))
            for p, n in zip(pos, neg)]


def _inner(xs, ys):
    return sum(float(np.real(np.vdot(_np(x).ravel(), _np(y).ravel()))) for x, y in zip(xs, ys))


# --- comparison -----------------------------------------------------------------------------

def _tol(given, dtype):
    return given if given is not None else _DEFAULT_TOL.get(np.dtype(dtype), 1e-5)


def _leaf_error(got, want, atol, rtol):
    """None when close, else a text naming the worst element."""
    got, want = _np(got), _np(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != expected {want.shape}"
    if got.size == 0:
        return None
    g, w = got.astype(np.complex128), want.astype(np.complex128)
    err = np.abs(g - w)
    same_nan = np.isnan(g) & np.isnan(w)
    err = np.where(same_nan, 0.0, np.where(np.isnan(err), np.inf, err))
    bad = err > atol + rtol * np.abs(w)
    if not bad.any():
        return None
    i = np.unravel_index(int(np.argmax(np.where(bad, err, -1.0))), err.shape)
    return (f"max abs error {err[i]:.3g} at index {tuple(int(k) for k in i)} "
            f"(got {got[i].item()!r}, expected {want[i].item()!r}; {int(bad.sum())}/{err.size} "
            f"elements off; atol={atol:g}, rtol={rtol:g})")


def _check_leaves(what, got_tree, want_leaves, atol, rtol, err_msg):
    paths_got = tree_flatten_with_path(got_tree)[0]
    if len(paths_got) != len(want_leaves):
        raise AssertionError(f"{err_msg}: {what} has {len(paths_got)} leaves, "
                             f"expected {len(want_leaves)}")
    problems = []
    for (path, g), w in zip(paths_got, want_leaves):
        dt = _np(w).dtype
        e = _leaf_error(g, w, _tol(atol, dt), _tol(rtol, dt))
        if e:
            problems.append(f"  {what} leaf {keystr(path) or '<root>'}: {e}")
    if problems:
        raise AssertionError(f"{err_msg}: {what} mismatch\n" + "\n".join(problems))


def _check_tangent_dtypes(outs, t_outs, err_msg):
    for (path, o), t in zip(tree_flatten_with_path(outs)[0], tree_flatten(t_outs)[0]):
        o, t = _np(o), _np(t)
        if dtypes.kind(o.dtype) in "fc" and (o.dtype != t.dtype or o.shape != t.shape):
            raise AssertionError(f"{err_msg}: tangent leaf {keystr(path) or '<root>'} is "
                                 f"{t.dtype}{list(t.shape)} but the output is "
                                 f"{o.dtype}{list(o.shape)}")


# --- the checks -----------------------------------------------------------------------------

def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check `f_jvp(args, tangents)` against a central difference of `f` at `args`."""
    err_msg = err_msg or "JVP"
    rng = np.random.default_rng(0)
    tangents = _tree_rand(rng, args)
    out, t_out = f_jvp(args, tangents)
    want = tree_flatten(f(*args))[0]
    _check_leaves("primal output", out, want, atol, rtol, err_msg)
    _check_tangent_dtypes(out, t_out, err_msg)
    _check_leaves("tangent", t_out, numerical_jvp(f, args, tangents, eps), atol, rtol, err_msg)


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
    """Check `f_vjp(*args)` by <vjp(ct), t> == <ct, numerical jvp(t)> for random t and ct."""
    err_msg = err_msg or "VJP"
    rng = np.random.default_rng(0)
    out, vjp_fn = f_vjp(*args)
    out_leaves = tree_flatten(out)[0]
    _check_leaves("primal output", out, tree_flatten(f(*args))[0], atol, rtol, err_msg)
    tangents = _tree_rand(rng, args)
    ct = _tree_rand(rng, out)
    # JAX's convention: vjp transposes w.r.t. the bilinear pairing Re(sum(a * b)), so
    # conj(vjp(conj(ct))) is the adjoint for the Hermitian inner product used below.
    ct_in = [np.conj(c) if _inexact(c) else _np(c)
             for c in tree_flatten(vjp_fn(_tree_conj(ct)))[0]]
    t_leaves = tree_flatten(tangents)[0]
    ct_leaves = tree_flatten(ct)[0]
    ip = _inner(ct_in, t_leaves)
    ip_want = _inner(ct_leaves, numerical_jvp(f, args, tangents, eps))
    dt = np.result_type(*[_np(o).dtype for o in out_leaves if _inexact(o)] or [np.float64])
    a, r = _tol(atol, dt), _tol(rtol, dt)
    if abs(ip - ip_want) > a + r * abs(ip_want):
        raise AssertionError(f"{err_msg}: <vjp(ct), t> = {ip!r} but <ct, jvp(t)> = "
                             f"{ip_want!r} (error {abs(ip - ip_want):.3g}, atol={a:g}, "
                             f"rtol={r:g})\n" + _vjp_breakdown(f, args, tangents, ct_leaves,
                                                               ct_in, eps))


def _vjp_breakdown(f, args, tangents, ct_leaves, ct_in, eps):
    """Per-input-leaf inner products, to say which argument's cotangent is wrong."""
    paths = tree_flatten_with_path(args)[0]
    t_leaves, treedef = tree_flatten(tangents)
    lines = []
    for i, (path, _) in enumerate(paths):
        if not _inexact(t_leaves[i]):
            continue
        only = [t if j == i else Array(np.zeros_like(_np(t))) for j, t in enumerate(t_leaves)]
        t_i = tree_unflatten(treedef, only)
        got = _inner([ct_in[i]], [t_leaves[i]])
        want = _inner(ct_leaves, numerical_jvp(f, args, t_i, eps))
        lines.append(f"  input leaf {keystr(path) or '<root>'}: <vjp(ct), t> = {got:.6g}, "
                     f"<ct, jvp(t)> = {want:.6g} (error {abs(got - want):.3g})")
    return "\n".join(lines)


@contextlib.contextmanager
def _x64():
    prev = config.enable_x64
    config.update("enable_x64", True)
    try:
        yield
    finally:
        config.update("enable_x64", prev)


def check_grads(f, args, order=2, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check the derivatives of `f` at `args` numerically, in float64, up to `order`.

    Forward mode (`"fwd"`): `jvp` against a central difference along a random direction.
    Reverse mode (`"rev"`): `vjp` against forward mode by the inner-product identity. With
    `order > 1` the same checks run on the jvp and vjp functions themselves, as in JAX.

    Args:
        f: a function of positional pytree arguments returning a pytree of arrays.
        args: a tuple of arguments; float leaves are converted to float64.
        order: the highest derivative order to check.
        modes: a subset of `("fwd", "rev")`.
        atol, rtol: tolerances (default 1e-5 for float64 values).
        eps: the finite-difference step (default 1e-4).

    Raises:
        AssertionError: naming the check (e.g. "VJP of JVP"), the leaf and its worst error.

    Example:
        >>> check_grads(funcgrad.lax.sin, (1.0,), order=2)
    """
    eps = eps or EPS
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {m!r}; use 'fwd' and/or 'rev'")
    with _x64():
        leaves, treedef = tree_flatten(tuple(args))
        args = tree_unflatten(treedef, [_to64(x) for x in leaves])
        _check_grads(f, args, order, modes, (atol, rtol, eps), "")


def _check_grads(f, args, order, modes, tols, msg):
    if "fwd" in modes:
        fwd_msg = f"JVP of {msg}" if msg else "JVP"
        check_jvp(f, functools.partial(funcgrad.jvp, f), args, *tols, fwd_msg)
        if order > 1:
            _check_grads(functools.partial(funcgrad.jvp, f), (args, args), order - 1, modes,
                         tols, fwd_msg)
    if "rev" in modes:
        rev_msg = f"VJP of {msg}" if msg else "VJP"
        check_vjp(f, functools.partial(funcgrad.vjp, f), args, *tols, rev_msg)
        if order > 1:
            def f_vjp(*a):  # vjp with the primal output as cotangent: nonlinear in a
                out, vjp_fn = funcgrad.vjp(f, *a)
                return vjp_fn(out)
            _check_grads(f_vjp, args, order - 1, modes, tols, rev_msg)


def check_batching(f, args, in_dims, rtol=1e-6, atol=1e-6):
    """Check a batching rule: `f`'s jaxpr (traced for one example) batched with
    `batch_eval` along `in_dims` equals a Python loop over the examples, stacked.

    Args:
        f: a function of arrays returning an array or a tuple/list of arrays.
        args: numpy arrays; `args[i]` is batched along `in_dims[i]` (None: unbatched).
        in_dims: one int or None per argument.

    Example:
        >>> check_batching(lambda x, y: x * y, (np.ones((3, 2)), np.ones(2)), (0, None))
    """
    from funcgrad.interpreters.batching import batch_eval
    size = next(np.shape(a)[d] for a, d in zip(args, in_dims) if d is not None)
    example = [a if d is None else np.take(a, 0, axis=d) for a, d in zip(args, in_dims)]
    closed = funcgrad.make_jaxpr(f)(*example)
    outs, out_dims = batch_eval(closed.jaxpr, closed.consts, list(args), list(in_dims))
    loop = [f(*[a if d is None else np.take(a, i, axis=d) for a, d in zip(args, in_dims)])
            for i in range(size)]
    loop = [r if isinstance(r, (tuple, list)) else [r] for r in loop]
    for k, (o, d) in enumerate(zip(outs, out_dims)):
        want = np.stack([np.asarray(r[k]) for r in loop])
        got = np.asarray(o)
        got = np.broadcast_to(got, (size,) + got.shape) if d is None else np.moveaxis(got, d, 0)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"batched output {k} (batch dim {d})")
