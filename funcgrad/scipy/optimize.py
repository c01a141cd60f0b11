"""`funcgrad.scipy.optimize`: `minimize` with BFGS and its `OptimizeResults`, as
`jax.scipy.optimize`.

BFGS (Nocedal & Wright, "Numerical Optimization", algorithm 6.1) with a line search for the
strong Wolfe conditions (algorithms 3.5 and 3.6: bracketing, then zooming by cubic,
quadratic or bisection steps), JAX's algorithm step for step, so iteration and evaluation
counts match JAX's. Every loop is a `lax.while_loop` over a pytree state: `minimize` runs
under `jit` and `vmap` (a batch of problems), with gradients from `funcgrad.value_and_grad`.
Imports funcgrad.numpy, lax and the transforms.

    >>> res = minimize(lambda x: fnp.sum((x - 3.0) ** 2), fnp.zeros(2), method="BFGS")
    >>> res.x
    Array([3., 3.], dtype=float32)
"""

from typing import NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import errors, lax

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The result of `minimize`: the point `x`, `success`, `status` (0 converged, 1 maximum
    iterations, 2 + the line search's status when it failed), the value `fun`, gradient
    `jac` and inverse Hessian estimate `hess_inv` at `x`, and the counts `nfev`, `njev`,
    `nit`."""

    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize the scalar function `fun(x, *args)` of a 1-D `x` from `x0`.

    Args:
        fun: the objective, differentiable with funcgrad.
        x0: the starting point (1-D).
        args: extra positional arguments of `fun` (a tuple).
        method: "BFGS" (the only one, as in JAX).
        tol: unused (as in JAX: use `options["gtol"]`).
        options: `maxiter` (default 200 * x0.size), `norm` (of the gradient, default inf),
            `gtol` (default 1e-5), `line_search_maxiter` (default 10).

    Returns:
        An `OptimizeResults`.

    Example:
        >>> minimize(lambda x, c: fnp.sum((x - c) ** 2), fnp.zeros(2), (1.0,),
        ...          method="BFGS").nit
        Array(2, dtype=int32)
    """
    if not isinstance(args, tuple):
        raise errors.op_error("minimize", f"args must be a tuple, got {type(args).__name__}",
                              cls=errors.FuncgradTypeError)
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise errors.op_error("minimize", f"method {errors.short_repr(method)} is not "
                              "recognized; the only method is 'BFGS' (as in JAX)",
                              cls=errors.FuncgradValueError)
    options = dict(options or {})
    unknown = set(options) - {"maxiter", "norm", "gtol", "line_search_maxiter"}
    if unknown:
        raise errors.op_error("minimize", f"unknown BFGS options {sorted(unknown)}",
                              cls=errors.FuncgradTypeError)
    x0 = fnp.asarray(x0)
    if x0.ndim != 1:
        raise errors.op_error("minimize", f"x0 must be 1-D, got shape {x0.shape}",
                              cls=errors.FuncgradValueError)
    x0 = x0.astype(fnp.result_type(x0, 1.0))
    s = _bfgs(lambda x: fun(x, *args), x0, **options)
    return OptimizeResults(x=s["x"], success=s["converged"] & ~s["failed"], status=s["status"],
                           fun=s["f"], jac=s["g"], hess_inv=s["H"], nfev=s["nfev"],
                           njev=s["ngev"], nit=s["k"])


def _value_and_grad(f):
    from funcgrad.api import value_and_grad
    return value_and_grad(f)


def _norm(g, ord):  # noqa: A002
    return fnp.linalg.norm(g, ord=ord)


def _pick(cond, new, old):
    """The entries of `new` where `cond` holds, else those of `old` (same keys as `new`)."""
    return {k: fnp.where(cond, v, old[k]) for k, v in new.items()}


def _i32(v):
    return fnp.asarray(v, fnp.int32)


def _bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    maxiter = 200 * x0.size if maxiter is None else int(maxiter)
    f0, g0 = _value_and_grad(fun)(x0)
    dt = x0.dtype
    state = {"converged": _norm(g0, norm) < gtol, "failed": fnp.asarray(False), "k": _i32(0),
             "nfev": _i32(1), "ngev": _i32(1), "x": x0, "f": f0.astype(dt), "g": g0,
             "H": fnp.eye(x0.shape[0], dtype=dt),
             "old_old_f": (f0 + fnp.linalg.norm(g0) / 2).astype(dt), "ls_status": _i32(0)}

    def cond(s):
        return ~s["converged"] & ~s["failed"] & (s["k"] < maxiter)

    def body(s):
        p = -(s["H"] @ s["g"])
        ls = _line_search(fun, s["x"], p, s["f"], s["old_old_f"], s["g"], line_search_maxiter)
        step = ls["a"] * p
        y = ls["g"] - s["g"]
        rho = 1.0 / (y @ step)
        w = fnp.eye(p.shape[0], dtype=dt) - rho * step[:, None] * y[None, :]
        h = w @ s["H"] @ w.T + rho * step[:, None] * step[None, :]
        return {"converged": _norm(ls["g"], norm) < gtol, "failed": ls["failed"],
                "k": s["k"] + 1, "nfev": s["nfev"] + ls["nfev"], "ngev": s["ngev"] + ls["ngev"],
                "x": s["x"] + step, "f": ls["f"], "g": ls["g"],
                "H": fnp.where(fnp.isfinite(rho), h, s["H"]), "old_old_f": s["f"],
                "ls_status": ls["status"]}
    s = lax.while_loop(cond, body, state)
    s["status"] = fnp.where(s["converged"], 0, fnp.where(
        s["k"] == maxiter, 1, fnp.where(s["failed"], 2 + s["ls_status"], -1))).astype(fnp.int32)
    return s


def _line_search(fun, x, p, f0, old_old_f, g0, maxiter, c1=1e-4, c2=0.9):
    """A step along `p` satisfying the strong Wolfe conditions (Nocedal & Wright 3.5)."""
    dt = x.dtype

    def phi(t):  # value, directional derivative and gradient at x + t p
        v, g = _value_and_grad(fun)(x + t * p)
        return v.astype(dt), fnp.real(g @ p).astype(dt), g
    dphi0 = fnp.real(g0 @ p)
    start = 1.01 * 2 * (f0 - old_old_f) / dphi0
    start = fnp.where(start > 1, 1.0, start).astype(dt)
    wolfe1 = lambda a, v: v > f0 + c1 * a * dphi0
    wolfe2 = lambda d: fnp.abs(d) <= -c2 * dphi0
    zero = fnp.zeros((), dt)
    state = {"done": fnp.asarray(False), "failed": fnp.asarray(False), "i": _i32(1),
             "a1": zero, "v1": f0, "d1": dphi0, "nfev": _i32(0), "ngev": _i32(0),
             "a": zero, "f": f0, "d": dphi0, "g": g0}

    def body(s):
        a = fnp.where(s["i"] == 1, start, s["a1"] * 2)
        v, d, g = phi(a)
        to_zoom1 = wolfe1(a, v) | ((v >= s["v1"]) & (s["i"] > 1))
        to_i = wolfe2(d) & ~to_zoom1
        to_zoom2 = (d >= 0) & ~to_zoom1 & ~to_i
        z1 = _zoom(phi, wolfe1, wolfe2, (s["a1"], s["v1"], s["d1"]), (a, v, d), g0, ~to_zoom1)
        z2 = _zoom(phi, wolfe1, wolfe2, (a, v, d), (s["a1"], s["v1"], s["d1"]), g0, ~to_zoom2)
        out = dict(s, nfev=s["nfev"] + 1 + z1["nfev"] + z2["nfev"],
                   ngev=s["ngev"] + 1 + z1["ngev"] + z2["ngev"])
        star = ("a", "f", "d", "g")
        out.update(_pick(to_zoom1, {k: z1[k] for k in star}, out))
        out.update(_pick(to_i, dict(a=a, f=v, d=d, g=g), out))
        out.update(_pick(to_zoom2, {k: z2[k] for k in star}, out))
        out["done"] = s["done"] | to_zoom1 | to_i | to_zoom2
        out["failed"] = s["failed"] | (to_zoom1 & z1["failed"]) | (to_zoom2 & z2["failed"])
        out.update(i=s["i"] + 1, a1=a, v1=v, d1=d)
        return out
    s = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, state)
    status = fnp.where(s["failed"], 1, fnp.where(s["i"] > maxiter, 3, 0)).astype(fnp.int32)
    a = s["a"]
    if np.finfo(dt).bits != 64:  # JAX keeps single-precision steps away from 0
        a = fnp.where(fnp.abs(a) < 1e-8, fnp.sign(a) * 1e-8, a).astype(dt)
    return {"failed": s["failed"] | ~s["done"], "nfev": s["nfev"], "ngev": s["ngev"],
            "a": a, "f": s["f"], "g": s["g"], "status": status}


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    r1, r2 = fb - fa - fpa * db, fc - fa - fpa * dc
    big_a = (dc ** 2 * r1 - db ** 2 * r2) / denom
    big_b = (-dc ** 3 * r1 + db ** 3 * r2) / denom
    return a + (-big_b + fnp.sqrt(big_b * big_b - 3 * big_a * fpa)) / (3 * big_a)


def _quadmin(a, fa, fpa, b, fb):
    db = b - a
    return a - fpa / (2 * ((fb - fa - fpa * db) / db ** 2))


def _zoom(phi, wolfe1, wolfe2, lo, hi, g0, skip):
    """Nocedal & Wright 3.6: shrink the bracket [lo, hi] to a strong Wolfe step."""
    (a_lo, v_lo, d_lo), (a_hi, v_hi, d_hi) = lo, hi
    dt = fnp.result_type(a_lo)
    state = {"done": fnp.asarray(False), "failed": fnp.asarray(False), "j": _i32(0),
             "a_lo": a_lo, "v_lo": v_lo, "d_lo": d_lo, "a_hi": a_hi, "v_hi": v_hi,
             "d_hi": d_hi, "a_rec": (a_lo + a_hi) / 2, "v_rec": (v_lo + v_hi) / 2,
             "a": fnp.ones((), dt), "f": v_lo, "d": d_lo, "g": g0, "nfev": _i32(0),
             "ngev": _i32(0)}
    threshold = 1e-5 if np.finfo(dt).bits < 64 else 1e-10

    def body(s):
        width = s["a_hi"] - s["a_lo"]
        lo_end, hi_end = fnp.minimum(s["a_hi"], s["a_lo"]), fnp.maximum(s["a_hi"], s["a_lo"])
        failed = s["failed"] | (width <= threshold)
        cubic = _cubicmin(s["a_lo"], s["v_lo"], s["d_lo"], s["a_hi"], s["v_hi"], s["a_rec"],
                          s["v_rec"])
        use_cubic = (s["j"] > 0) & (cubic > lo_end + 0.2 * width) & (cubic < hi_end - 0.2 *
                                                                        width)
        quad = _quadmin(s["a_lo"], s["v_lo"], s["d_lo"], s["a_hi"], s["v_hi"])
        use_quad = ~use_cubic & (quad > lo_end + 0.1 * width) & (quad < hi_end - 0.1 * width)
        a = fnp.where(use_cubic, cubic, fnp.where(use_quad, quad, (s["a_lo"] + s["a_hi"]) / 2))
        v, d, g = phi(a.astype(dt))
        hi_to_j = wolfe1(a, v) | (v >= s["v_lo"])
        star_to_j = wolfe2(d) & ~hi_to_j
        hi_to_lo = (d * (s["a_hi"] - s["a_lo"]) >= 0) & ~hi_to_j & ~star_to_j
        lo_to_j = ~hi_to_j & ~star_to_j
        out = dict(s, failed=failed, nfev=s["nfev"] + 1, ngev=s["ngev"] + 1)
        out.update(_pick(hi_to_j, dict(a_hi=a, v_hi=v, d_hi=d, a_rec=s["a_hi"],
                                       v_rec=s["v_hi"]), out))
        out.update(_pick(star_to_j, dict(a=a, f=v, d=d, g=g), out))
        out["done"] = out["done"] | star_to_j
        out.update(_pick(hi_to_lo, dict(a_hi=out["a_lo"], v_hi=out["v_lo"], d_hi=out["d_lo"],
                                        a_rec=out["a_hi"], v_rec=out["v_hi"]), out))
        out.update(_pick(lo_to_j & ~hi_to_lo, dict(a_rec=out["a_lo"], v_rec=out["v_lo"]), out))
        out.update(_pick(lo_to_j, dict(a_lo=a, v_lo=v, d_lo=d), out))
        out["j"] = s["j"] + 1
        out["failed"] = out["failed"] | (out["j"] >= 30)
        return {k: fnp.asarray(v).astype(s[k].dtype) for k, v in out.items()}
    return lax.while_loop(lambda s: ~s["done"] & ~skip & ~s["failed"], body, state)
