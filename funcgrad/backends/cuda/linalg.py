"""Linear-algebra library calls of the CUDA backend: the `funcgrad.lax.linalg` primitives
through CuPy's cuSOLVER wrappers (`xp.linalg`: batched potrf, getrf/getrs, geqrf, syevj,
gesvdj), with the CPU's semantics: a matrix cuSOLVER rejects gives NaN, never an exception;
LU is the batch-vectorized column loop of the eager implementation, run with CuPy.

Each entry is `fn(xp, *operands, **params)`, as `runtime.LIBRARY`'s; `xp` is CuPy on a GPU
and numpy under the CPU emulation (`emulate.EmulatedRuntime`), which is how the tests run
this file without a GPU. Written against CuPy's documented API; not yet run on a GPU.
"""

import contextlib

import numpy as np

from funcgrad.lax import linalg_decomp


def _raising(xp):
    """CuPy reports cuSOLVER failures only under `cupyx.errstate(linalg="raise")`."""
    if xp is np:
        return contextlib.nullcontext()
    import cupyx
    return cupyx.errstate(linalg="raise")


def _or_nan(xp, fn, x, n_out):
    """`fn(x)` for the whole batch; where cuSOLVER rejects it, matrix by matrix with NaN
    results for the matrices it rejects."""
    try:
        with _raising(xp):
            out = fn(x)
        return list(out) if n_out > 1 else [out]
    except np.linalg.LinAlgError:
        pass
    n = int(np.prod(x.shape[:-2], dtype=np.int64))
    mats, res = x.reshape((n,) + x.shape[-2:]), None
    for i in range(n):
        try:
            with _raising(xp):
                got = fn(mats[i])
            got = list(got) if n_out > 1 else [got]
        except np.linalg.LinAlgError:
            got = None
        if res is None and got is not None:
            res = [xp.full((n,) + g.shape, np.nan, g.dtype) for g in got]
        if got is not None:
            for r, g in zip(res, got):
                r[i] = g
    if res is None:  # every matrix rejected (or none at all)
        return _nan_like(xp, fn, x, n_out)
    return [r.reshape(x.shape[:-2] + r.shape[1:]) for r in res]


def _nan_like(xp, fn, x, n_out):
    """NaN results of the shapes a valid call gives (probed on an identity matrix)."""
    probe = fn(xp.eye(x.shape[-2], x.shape[-1], dtype=x.dtype))
    probe = list(probe) if n_out > 1 else [probe]
    return [xp.full(x.shape[:-2] + p.shape, np.nan, p.dtype) for p in probe]


def cholesky(xp, x):
    return _or_nan(xp, xp.linalg.cholesky, x, 1)[0]


def triangular_solve(xp, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a = xp.tril(a) if lower else xp.triu(a)
    if unit_diagonal:
        eye = xp.eye(a.shape[-1], dtype=a.dtype)
        a = a * (1 - eye) + eye
    a = a.conj() if conjugate_a else a
    lower = lower != transpose_a
    if transpose_a:
        a = xp.swapaxes(a, -1, -2)
    if not left_side:
        a, b, lower = xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2), not lower
    if b.size == 0:
        x = xp.zeros(b.shape, b.dtype)
    else:
        try:  # CuPy gives inf/NaN for a zero pivot; numpy (the emulation) raises
            x = xp.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            x = linalg_decomp._substitute(a, b, lower)
    return x if left_side else xp.swapaxes(x, -1, -2)


def lu(xp, x):
    return linalg_decomp._lu_impl(x, xp=xp)


def qr(xp, x, *, full_matrices):
    if x.size == 0:
        return linalg_decomp._qr_impl(x, full_matrices=full_matrices)
    return _or_nan(xp, lambda a: xp.linalg.qr(a, mode="complete" if full_matrices
                                              else "reduced"), x, 2)


def eigh(xp, x, *, lower):
    if x.size == 0:
        return linalg_decomp._eigh_impl(x, lower=lower)
    w, v = _or_nan(xp, lambda a: xp.linalg.eigh(a, UPLO="L" if lower else "U"), x, 2)
    return [v, w]


def svd(xp, x, *, full_matrices, compute_uv):
    if x.size == 0:
        return linalg_decomp._svd_impl(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv:
        return _or_nan(xp, lambda a: xp.linalg.svd(a, compute_uv=False), x, 1)
    u, s, vh = _or_nan(xp, lambda a: xp.linalg.svd(a, full_matrices=full_matrices), x, 3)
    return [s, u, vh]


def _single_or_wider(fn):
    """cuSOLVER has no half precision: such operands are computed in float32 (the runtime
    casts results to the IR's dtypes)."""
    def run(xp, *xs, **params):
        xs = [x.astype(np.float32) if x.dtype.kind == "f" and x.dtype.itemsize < 4 else x
              for x in xs]
        return fn(xp, *xs, **params)
    return run


LIBRARY = {name: _single_or_wider(fn) for name, fn in (
    ("cholesky", cholesky), ("triangular_solve", triangular_solve), ("lu", lu), ("qr", qr),
    ("eigh", eigh), ("svd", svd))}
