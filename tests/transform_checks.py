"""The four checks every function of the long tail gets (issue 28, item 8), in one helper:
its value against a reference (NumPy/SciPy or recorded JAX values), its derivatives with
`check_grads` in float64, `vmap` against a Python loop over stacked arguments, and `jit`
against eager evaluation.

    check_all(fnp.diff, (x,), want=np.diff(x), grad=(0,), batch=(0,))
"""

import numpy as np

import funcgrad as fg
from funcgrad.test_util import check_grads
from funcgrad.tree_util import tree_leaves, tree_map


def _np(x):
    return np.asarray(x)


def close(got, want, rtol=1e-5, atol=1e-6, what=""):
    """Every leaf of `got` equals `want`'s (same shapes; values to the tolerance)."""
    g, w = tree_leaves(got), tree_leaves(want)
    assert len(g) == len(w), f"{what}: {len(g)} outputs, expected {len(w)}"
    for a, b in zip(g, w):
        a, b = _np(a), _np(b)
        assert a.shape == b.shape, f"{what}: shape {a.shape}, expected {b.shape}"
        if b.dtype.kind in "fc" or a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)
        else:
            np.testing.assert_array_equal(a, b, err_msg=what)


def _perturbed(x, k):
    x = _np(x)
    if x.dtype.kind in "fc":
        return x + np.asarray(0.05 * k * np.cos(np.arange(x.size) + k), x.dtype).reshape(
            x.shape)
    return x


def check_jit(f, args, rtol=1e-5, atol=1e-6):
    """jit(f) == f on `args`."""
    close(fg.jit(f)(*args), f(*args), rtol, atol, "jit vs eager")


def check_vmap(f, args, batch, size=3, rtol=1e-5, atol=1e-6):
    """vmap of `f` over the arguments at positions `batch` (copies perturbed per example,
    stacked on axis 0) against a Python loop over the examples."""
    examples = [[_perturbed(a, k) if i in batch else a for i, a in enumerate(args)]
                for k in range(size)]
    stacked = [np.stack([e[i] for e in examples]) if i in batch else a
               for i, a in enumerate(args)]
    in_axes = tuple(0 if i in batch else None for i in range(len(args)))
    got = fg.vmap(f, in_axes=in_axes)(*stacked)
    loop = [f(*e) for e in examples]
    want = tree_map(lambda *xs: np.stack([_np(x) for x in xs]), *loop)
    close(got, want, rtol, atol, "vmap vs loop")


def check_all(f, args, want=None, grad=(), batch=None, order=1, rtol=1e-5, atol=1e-6,
              grad_tol=1e-4, jit=True, eps=None):
    """Value (when `want` is given), derivatives w.r.t. the arguments at `grad` (float64,
    up to `order`), vmap over `batch` (default: the float arguments) and jit."""
    args = tuple(args)
    if want is not None:
        close(f(*args), want, rtol, atol, "value")
    if grad:
        fixed = list(args)

        def g(*diff_args):
            full = list(fixed)
            for i, v in zip(grad, diff_args):
                full[i] = v
            return f(*full)
        check_grads(g, tuple(np.asarray(args[i], np.float64) for i in grad), order=order,
                    atol=grad_tol, rtol=grad_tol, eps=eps)
    if batch is None:
        batch = tuple(i for i, a in enumerate(args)
                      if isinstance(a, np.ndarray) and a.dtype.kind in "fc")
    if batch:
        check_vmap(f, args, batch, rtol=rtol, atol=atol)
    if jit:
        check_jit(f, args, rtol, atol)
