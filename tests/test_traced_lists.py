"""A (nested) list or tuple holding traced values, given to any public funcgrad.numpy function
(and fnp.linalg, fnp.fft), is stacked, so derivatives flow through it: under grad and jvp each
call matches the same call on the stacked array (value, gradient, tangent). Before, such a
list became a constant and its derivative was silently zero.

Every public function is walked, found from the modules' names, so a function added later is
called too: it needs an entry in CALLS when the generic call (a float32[2, 3] array for each
required argument) does not fit it, or in EXCLUDED with the reason it takes no array-like.
"""

import inspect

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
import funcgrad.scipy as fsp
import funcgrad.scipy.linalg
import funcgrad.scipy.special  # noqa: F401  (loads the modules walked)
from funcgrad.tree_util import tree_leaves

# --- what each argument is -------------------------------------------------------------------


class F:
    """A float array argument, computed from the differentiated input `a` (by `post`)."""

    def __init__(self, *shape, lo=0.2, hi=0.8, post=None, sort=False):
        self.shape, self.lo, self.hi, self.post, self.sort = shape, lo, hi, post, sort

    def base(self, seed):
        n = int(np.prod(self.shape))
        frac = (np.arange(n) * 0.6180339887 + 0.37 * seed) % 1.0  # distinct values
        v = self.lo + (self.hi - self.lo) * frac
        return (np.sort(v) if self.sort else v).reshape(self.shape).astype(np.float32)

    def make(self, a):
        return a if self.post is None else self.post(a)


class I(F):  # noqa: E742  (the marker's name reads as the dtype)
    """An int32 array argument: `values`, as a traced value computed from `a` (no gradient)."""

    def __init__(self, values):
        self.values = np.asarray(values, np.int32)
        super().__init__(*self.values.shape)

    def make(self, a):
        return fnp.asarray(a * 0.0).astype(fnp.int32) + self.values


class B(I):
    """A bool array argument `values`, traced as `I`."""

    def make(self, a):
        return super().make(a) > 0


def _spd(a):  # a well-conditioned symmetric positive definite matrix from a square `a`
    return a @ a.T + 2.0 * fnp.eye(a.shape[0])


def _diag_dominant(a):
    return a + 2.0 * fnp.eye(a.shape[0])


def _sym(a):
    return (a + a.T) / 2.0 + fnp.diag(fnp.arange(a.shape[0]) * 1.0)


def _cplx(a):
    return a + 0.5j * a[::-1]


SQ, M23 = F(3, 3, post=_diag_dominant), F(2, 3)

# Calls whose generic form (an F(2, 3) per required argument) does not fit: (args, kwargs).
CALLS = {
    # elementwise with a narrower domain or integer/bool operands
    "acosh": ((F(2, 3, lo=1.2, hi=1.8),), {}), "arccosh": ((F(2, 3, lo=1.2, hi=1.8),), {}),
    "angle": ((F(2, 3, post=_cplx),), {}), "conj": ((F(2, 3, post=_cplx),), {}),
    "conjugate": ((F(2, 3, post=_cplx),), {}), "real": ((F(2, 3, post=_cplx),), {}),
    "imag": ((F(2, 3, post=_cplx),), {}), "iscomplex": ((F(2, 3, post=_cplx),), {}),
    "isreal": ((F(2, 3, post=_cplx),), {}),
    **{name: ((I([[1, 2, 3], [4, 5, 6]]), I([[3, 1, 2], [1, 0, 2]])), {}) for name in (
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
        "left_shift", "right_shift")},
    **{name: ((I([[1, 2, 3], [4, 5, 6]]),), {}) for name in (
        "bitwise_count", "bitwise_invert", "bitwise_not", "invert")},
    **{name: ((B([[1, 0, 1], [0, 0, 1]]), B([[1, 1, 0], [0, 1, 1]])), {}) for name in (
        "logical_and", "logical_or", "logical_xor")},
    "logical_not": ((B([[1, 0, 1], [0, 0, 1]]),), {}),
    "where": ((B([[1, 0, 1], [0, 0, 1]]), M23, F(2, 3)), {}),
    "clip": ((M23,), {"min": F(3, lo=0.3, hi=0.5), "max": 0.7}),
    # shapes and indices
    "reshape": ((M23,), {"shape": (3, 2)}), "expand_dims": ((M23, 0), {}),
    "moveaxis": ((M23, 0, 1), {}), "swapaxes": ((M23, 0, 1), {}),
    "broadcast_to": ((F(3), (2, 3)), {}), "tile": ((M23, 2), {}), "repeat": ((M23, 2), {}),
    "roll": ((M23, 1), {}), "pad": ((M23, 1), {"constant_values": F(2, 2)}),
    "split": ((F(4, 3), 2), {}), "array_split": ((F(5, 3), 2), {}),
    "hsplit": ((F(2, 4), 2), {}), "vsplit": ((F(4, 3), 2), {}), "dsplit": ((F(2, 1, 4), 2), {}),
    "take": ((M23, np.array([2, 0])), {"axis": 1}),
    "take_along_axis": ((M23, I([[2, 0, 1], [0, 0, 2]])), {"axis": 1}),
    "put_along_axis": ((M23, I([[2], [0]]), F(2, 1), 1), {"inplace": False}),
    "append": ((F(3), F(2)), {}), "full": (((2, 3), F(3)), {}),
    "full_like": ((M23, F(3)), {}), "astype": ((M23, np.float32), {}),
    "linspace": ((F(2), F(2, lo=1.0, hi=2.0)), {"num": 3}),
    "logspace": ((F(2), F(2, lo=1.0, hi=2.0)), {"num": 3}),
    "searchsorted": ((F(5, sort=True), F(3)), {}),
    "ravel_multi_index": (((I([0, 1, 1]), I([2, 0, 1])), (2, 3)), {}),
    "unravel_index": ((I([5, 1, 3]), (2, 3)), {}),
    "ix_": ((I([0, 1]), I([2, 0, 1])), {}),
    "average": ((M23,), {"axis": 1, "weights": F(3, lo=1.0, hi=2.0)}),
    "cumulative_sum": ((M23,), {"axis": 1}), "cumulative_prod": ((M23,), {"axis": 1}),
    "diag_indices_from": ((SQ,), {}),
    # sequences of arrays
    **{name: (([F(2, 3), F(2, 3)],), {}) for name in (
        "concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack",
        "row_stack")},
    "broadcast_arrays": ((M23, F(3)), {}), "meshgrid": ((F(2), F(3)), {}),
    "atleast_1d": ((M23,), {}), "atleast_2d": ((M23,), {}), "atleast_3d": ((M23,), {}),
    # products
    "dot": ((M23, F(3, 2)), {}), "matmul": ((M23, F(3, 2)), {}),
    "einsum": (("ij,jk->ik", M23, F(3, 2)), {}),
    "outer": ((F(2), F(3)), {}),
    # linalg
    "linalg.cholesky": ((F(3, 3, post=_spd),), {}), "linalg.det": ((SQ,), {}),
    "linalg.inv": ((SQ,), {}), "linalg.slogdet": ((SQ,), {}), "linalg.cond": ((SQ,), {}),
    "linalg.eig": ((F(3, 3, post=_sym),), {}), "linalg.eigvals": ((F(3, 3, post=_sym),), {}),
    "linalg.eigh": ((F(3, 3, post=_sym),), {}), "linalg.eigvalsh": ((F(3, 3, post=_sym),), {}),
    "linalg.matrix_power": ((SQ, 3), {}), "linalg.matrix_norm": ((SQ,), {}),
    "linalg.matrix_rank": ((SQ,), {}), "linalg.trace": ((SQ,), {}),
    "linalg.matmul": ((M23, F(3, 2)), {}),
    "linalg.lstsq": ((F(3, 2), F(3)), {}), "linalg.pinv": ((F(3, 2),), {}),
    "linalg.qr": ((F(3, 2),), {}), "linalg.svd": ((F(3, 2),), {"full_matrices": False}),
    "linalg.svdvals": ((F(3, 2),), {}), "linalg.solve": ((SQ, F(3)), {}),
    "linalg.multi_dot": (([M23, F(3, 2), F(2, 2)],), {}), "linalg.outer": ((F(2), F(3)), {}),
    "linalg.tensorinv": ((F(6, 6, post=lambda a: fnp.reshape(_diag_dominant(a), (6, 2, 3))),),
                         {"ind": 1}),
    "linalg.tensorsolve": ((F(6, 6, post=lambda a: fnp.reshape(_diag_dominant(a), (2, 3, 6))),
                            F(2, 3)), {}),
    # fft
    **{f"fft.{name}": ((F(2, 4),), {}) for name in (
        "fft", "ifft", "rfft", "ihfft", "fft2", "ifft2", "rfft2", "fftn", "ifftn", "rfftn",
        "fftshift", "ifftshift")},
    **{f"fft.{name}": ((F(2, 3, post=_cplx),), {}) for name in (
        "hfft", "irfft", "irfft2", "irfftn")},
    # scipy
    "scipy.special.multigammaln": ((F(2, 3, lo=2.0, hi=3.0), 2), {}),
    "scipy.special.polygamma": ((1, M23), {}),
    **{f"scipy.linalg.{name}": ((F(3, 3, post=_spd),), {}) for name in (
        "cho_factor", "cholesky", "det", "eigh", "expm", "inv", "lu", "lu_factor")},
    "scipy.linalg.cho_solve": (((F(3, 3, post=_spd), False), F(3)), {}),
    "scipy.linalg.lu_solve": (((SQ, I([0, 1, 2])), F(3)), {}),
    "scipy.linalg.solve": ((SQ, F(3)), {}), "scipy.linalg.solve_triangular": ((SQ, F(3)), {}),
    "scipy.linalg.qr": ((F(3, 2),), {"mode": "economic"}),
    "scipy.linalg.svd": ((F(3, 2),), {"full_matrices": False}),
    # nn
    "nn.dot_product_attention": ((F(2, 1, 3), F(2, 1, 3), F(2, 1, 3)), {}),
    "nn.dot_product_attention_weights": ((F(2, 1, 3), F(2, 1, 3)), {}),
    "nn.make_attention_mask": ((B([1, 0]), B([1, 1, 0])), {}),
    "nn.one_hot": ((I([[0, 2, 1], [1, 1, 0]]), 3), {}),
    "nn.smooth_labels": ((M23, 0.2), {}), "nn.glu": ((F(2, 4),), {}),
    "nn.softmax_cross_entropy_with_integer_labels": ((M23, I([2, 0])), {}),
    # the long tail (issue 28, item 8)
    "convolve": ((F(4), F(3)), {}), "correlate": ((F(4), F(3)), {}),
    "interp": ((F(3, lo=0.3, hi=1.7), F(4, lo=0.0, hi=2.0, sort=True), F(4)), {}),
    "gradient": ((M23, F(3, sort=True)), {"axis": 1}),
    **{name: ((M23, F(2)), {}) for name in ("quantile", "nanquantile")},
    **{name: ((M23, F(2, lo=10.0, hi=90.0)), {}) for name in ("percentile", "nanpercentile")},
    "bincount": ((I([1, 0, 3]),), {"weights": F(3), "length": 5}),
    "digitize": ((M23, F(4, sort=True)), {}),
    "histogram2d": ((F(5), F(5)), {"bins": 2, "density": True}),
    # the second set holds the first's values, so the intersection moves with the first
    "intersect1d": ((M23, F(2, 3, post=lambda a: fnp.asarray(F(2, 3).base(0)))), {}),
    "apply_along_axis": ((lambda v: v * fnp.sum(v), 1, M23), {}),
    "apply_over_axes": ((fnp.sum, M23, [0]), {}),
    "partition": ((M23, 1), {}), "argpartition": ((M23, 1), {}),
    "choose": ((I([[0, 1, 0], [1, 1, 0]]), [M23, F(2, 3)]), {}),
    "fill_diagonal": ((M23, F(2)), {"inplace": False}),
    "insert": ((M23, 1, F(3)), {"axis": 0}),
    "delete": ((M23, np.array([0, 2])), {"axis": 1}),
    "piecewise": ((M23, [B([[1, 0, 1], [0, 0, 1]])], [lambda v: v * 2.0, 1.0]), {}),
    "place": ((M23, B([[1, 0, 1], [0, 1, 1]]), F(2)), {"inplace": False}),
    "put": ((M23, I([0, 4]), F(2)), {"inplace": False}),
    "packbits": ((I([[1, 0, 1], [0, 1, 1]]),), {}),
    "resize": ((M23, (3, 4)), {}),
    "select": (([B([[1, 0, 1], [0, 0, 1]])], [M23]), {"default": F(2, 3)}),
    **{name: ((F(3), F(2)), {}) for name in ("polyadd", "polysub", "polymul", "polydiv",
                                             "polyval")},
    "polyder": ((F(4),), {}), "polyint": ((F(3),), {"k": F(1)}), "poly": ((F(3),), {}),
    "polyfit": ((F(4, sort=True), F(4), 2), {}), "vander": ((F(3), 3), {}),
    "roots": ((F(3, post=lambda a: a * 0.1 + fnp.array([1.0, -3.0, 2.0])),), {}),
    "vecmat": ((F(3), F(3, 2)), {}), "matvec": ((F(2, 3), F(3)), {}),
    "scipy.special.factorial": ((F(2, 3, lo=1.0, hi=4.0),), {}),
    "kaiser": ((4, F(lo=1.0, hi=3.0)), {}),
    **{name: ((I([[12, 7, 0], [8, 100, 9]]), I([[18, 0, 4], [12, 75, 6]])), {})
       for name in ("gcd", "lcm")},
    "ldexp": ((M23, I([[1, 2, -1], [0, 3, 1]])), {}),
    "scipy.linalg.companion": ((F(4, lo=1.0, hi=2.0),), {}),
    "scipy.linalg.fiedler_companion": ((F(5, lo=1.0, hi=2.0),), {}),
    "scipy.linalg.convolution_matrix": ((F(3), 4), {}),
    "scipy.linalg.leslie": ((F(3), F(2)), {}),
    "scipy.special.zeta": ((2.5, M23), {}),
    "scipy.special.bessel_jn": ((F(2, 3, lo=5.0, hi=9.0),), {"v": 2}),
    "scipy.signal.stft": ((F(12),), {"nperseg": 4}),
    "scipy.signal.istft": ((F(3, 5, post=lambda a: a + 0.5j * a[::-1]),), {}),
    "scipy.signal.welch": ((F(12),), {"nperseg": 4}),
    "scipy.signal.csd": ((F(12), F(12)), {"nperseg": 4}),
    "scipy.linalg.eigh_tridiagonal": ((F(4), F(3)), {}),
    "scipy.linalg.expm_frechet": ((SQ, F(3, 3)), {}),
    "scipy.linalg.polar": ((F(3, 2),), {}),
    "scipy.linalg.qr_multiply": ((F(3, 2), F(2, 3)), {}),
    "scipy.linalg.solve_sylvester": ((SQ, SQ, F(3, 3)), {}),
    "scipy.linalg.sqrtm": ((F(3, 3, post=_spd),), {}),
    "scipy.ndimage.map_coordinates": ((M23, [F(4, lo=0.1, hi=0.9), F(4, lo=0.2, hi=1.8)], 1),
                                      {}),
}

# Public functions that take no array-like (nothing a list of traced values could be given to).
EXCLUDED = {
    **dict.fromkeys(("arange", "empty", "eye", "identity", "indices", "ones", "zeros", "tri",
                     "tril_indices", "triu_indices", "diag_indices"),
                    "takes sizes, shapes and dtypes only"),
    **dict.fromkeys(("promote_types", "isdtype", "issubdtype", "result_type", "can_cast"),
                    "reads dtypes only (NumPy 2 takes no lists there)"),
    "broadcast_shapes": "takes shapes only",
    "from_dlpack": "takes a DLPack producer (a list is none, a traced value has no buffer)",
    **dict.fromkeys(("fft.fftfreq", "fft.rfftfreq"), "takes a length and a scalar spacing"),
    "nn.child_key": "takes a PRNG key", "nn.scope": "names parameters",
    "nn.layer_error": "builds an error", "nn.summary": "prints a parameter tree",
    **dict.fromkeys(("vectorize", "fromfunction"), "takes a function (and a shape): the "
                    "function it makes or calls is walked through vmap's tests"),
    "mask_indices": "takes a size and a function",
    "unpackbits": "takes uint8 bytes only (its inverse, packbits, is walked)",
    "block": "nested lists are its block structure (NumPy's meaning), never stacked values",
    "scipy.special.bernoulli": "takes an int", "scipy.optimize.minimize": "takes a function",
    **dict.fromkeys(("array_repr", "array_str"), "returns text (host-side printing)"),
    **dict.fromkeys(("get_printoptions", "printoptions", "set_printoptions"),
                    "NumPy's printing options"),
    "iterable": "a Python predicate on any object",
    **dict.fromkeys(("bartlett", "blackman", "hamming", "hanning"), "takes a size"),
    "einsum_path": "takes a subscripts string and reads shapes only",
    **dict.fromkeys(("frombuffer", "fromfile", "fromiter", "fromstring", "load", "save",
                     "savez"), "reads or writes files and buffers on the host"),
    "frompyfunc": "takes a function",
    "nextafter": "not differentiable (as in JAX); the walk differentiates",
    **dict.fromkeys(tuple(f"scipy.linalg.{n}" for n in (
        "dft", "hadamard", "helmert", "hilbert", "invhilbert", "invpascal", "pascal")),
        "takes a size"),
    **dict.fromkeys(("scipy.linalg.schur", "scipy.linalg.rsf2csf", "scipy.linalg.hessenberg",
                     "scipy.linalg.funm"),
                    "not differentiable (as in JAX); the walk differentiates"),
}

# Functions whose outputs have a zero derivative (integer or bool results, piecewise constant
# functions, results that depend only on shapes): the walk still checks their values; every
# other function must show a non-zero tangent, so a silently constant list would be noticed.
ZERO_DERIVATIVE = {
    *("all", "any", "allclose", "array_equal", "array_equiv", "isclose", "equal", "not_equal",
      "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_not",
      "logical_or", "logical_xor", "isfinite", "isinf", "isnan", "isneginf", "isposinf",
      "iscomplex", "isreal", "signbit", "iscomplexobj", "isrealobj", "isscalar"),  # bool
    *("argmax", "argmin", "nanargmax", "nanargmin", "argsort", "argwhere", "nonzero",
      "flatnonzero", "count_nonzero", "searchsorted", "ravel_multi_index", "unravel_index",
      "ix_", "diag_indices_from", "tril_indices_from", "triu_indices_from", "ndim", "shape",
      "size", "linalg.matrix_rank"),  # integer results
    *("bitwise_and", "bitwise_count", "bitwise_invert", "bitwise_left_shift", "bitwise_not",
      "bitwise_or", "bitwise_right_shift", "bitwise_xor", "invert", "left_shift",
      "right_shift"),  # integer operands
    *("ceil", "floor", "fix", "trunc", "rint", "round", "around", "sign", "floor_divide",
      "heaviside"),  # piecewise constant
    *("empty_like", "ones_like", "zeros_like", "nn.count_params",
      "nn.make_causal_mask"),  # shapes only
    *("nn.make_attention_mask", "nn.one_hot"),  # bool or integer operands
    *("isin", "digitize", "argpartition", "lexsort", "packbits"),  # the long tail: bool or
    # integer results
    "scipy.special.gammasgn",  # piecewise constant
    *("gcd", "lcm"),  # integer operands
    "spacing",  # piecewise constant
}

_STATIC = {"axis": 0, "shape": (3, 2), "indices_or_sections": 2, "n": 2, "repeats": 2,
           "reps": 2, "shift": 1, "pad_width": 1}


MODULES = {"": fnp, "linalg.": fnp.linalg, "fft.": fnp.fft, "scipy.special.": fsp.special,
           "scipy.linalg.": fsp.linalg, "nn.": nn,
           **{f"scipy.{m}.": getattr(fsp, m) for m in ("fft", "integrate", "ndimage",
                                                       "optimize", "signal")}}
FUNCTIONS = {f"{prefix}{n}": getattr(module, n)
             for prefix, module in MODULES.items()
             for n in sorted(getattr(module, "__all__", dir(module)))
             if not n.startswith("_") and inspect.isfunction(getattr(module, n))}
NAMES = list(FUNCTIONS)
CASES = [n for n in NAMES if n not in EXCLUDED]


def _generic_call(fn):
    args = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            args.append(_STATIC[p.name] if p.name in _STATIC else F(2, 3))
        elif p.kind == p.VAR_POSITIONAL:
            args.append(F(2, 3))
    return tuple(args), {}


# --- building the two calls ------------------------------------------------------------------

def _markers(tree, path=()):
    if isinstance(tree, F):
        return [path]
    if isinstance(tree, (list, tuple)):
        return [m for i, t in enumerate(tree) for m in _markers(t, path + (i,))]
    if isinstance(tree, dict):
        return [m for k, t in tree.items() for m in _markers(t, path + (k,))]
    return []


def _nested(t, depth=0):
    """A traced array as nested lists (tuples at odd depths) of rank-0 traced values."""
    if not t.shape:
        return t
    items = [_nested(t[k], depth + 1) for k in range(t.shape[0])]
    return items if depth % 2 == 0 else tuple(items)


def _fill(tree, target, a, listed, path=()):
    """`tree` with its markers made into arrays: the one at path `target` from the traced `a`
    (as nested lists when `listed`), the others concrete."""
    if isinstance(tree, F):
        if path != target:
            return tree.make(fnp.asarray(tree.base(len(path))))
        v = tree.make(a)
        return _nested(v) if listed else v
    if isinstance(tree, (list, tuple)):
        return type(tree)(_fill(t, target, a, listed, path + (i,)) for i, t in enumerate(tree))
    if isinstance(tree, dict):
        return {k: _fill(t, target, a, listed, path + (k,)) for k, t in tree.items()}
    return tree


def _at(tree, path):
    for p in path:
        tree = tree[p]
    return tree


def _weights(shape, k):
    n = int(np.prod(shape))
    return np.cos(np.arange(n) * 1.3 + k).reshape(shape).astype(np.float32)


def _loss(out, a):
    """A real scalar from every float/complex output (weighted, so that no sum cancels), and
    the outputs themselves."""
    total = fnp.sum(a) * 0.0
    for k, leaf in enumerate(tree_leaves(out)):
        if hasattr(leaf, "dtype") and leaf.dtype.kind in "fc":
            w, w2 = _weights(leaf.shape, k), _weights(leaf.shape, k + 0.5)
            total = total + fnp.sum(fnp.real(leaf) * w) + fnp.sum(fnp.imag(leaf) * w2)
    return total, out


def _results(fn, call_tree, target, listed):
    """(outputs, gradient) under grad and (outputs, tangents) under jvp, with respect to the
    argument at `target`."""
    def call(a):
        args, kwargs = _fill(call_tree, target, a, listed)
        return fn(*args, **kwargs)
    a0 = _at(call_tree, target).base(0)
    (_, out), g = fg.value_and_grad(lambda a: _loss(call(a), a), has_aux=True)(a0)
    t0 = np.sin(np.arange(a0.size) + 1.0).reshape(a0.shape).astype(np.float32)
    outs, tangents = fg.jvp(call, (a0,), (t0,))
    return out, g, outs, tangents


def _same(got, want, what):
    got, want = tree_leaves(got), tree_leaves(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        if not hasattr(w, "dtype"):
            assert g == w, what
            continue
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g!r} vs {w!r}"
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6,
                                   err_msg=what)


# --- the walk --------------------------------------------------------------------------------

def test_every_public_function_is_walked_or_excluded():
    assert len(NAMES) > 280
    assert not set(EXCLUDED) - set(NAMES), "EXCLUDED names a function that does not exist"
    assert not set(CALLS) - set(CASES), f"CALLS names no walked function: {set(CALLS) - set(CASES)}"
    assert {"mean", "append", "sin", "linalg.norm", "linalg.det", "fft.fft"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_a_list_of_traced_values_matches_the_stacked_array(name):
    fn = FUNCTIONS[name]
    call_tree = CALLS[name] if name in CALLS else _generic_call(fn)
    targets = _markers(call_tree)
    assert targets, f"{name}: no array argument in its call; list it in EXCLUDED with a reason"
    moved = False
    for target in targets:
        where = f"{name}, argument at {target}"
        want = _results(fn, call_tree, target, listed=False)
        got = _results(fn, call_tree, target, listed=True)
        for part, g, w in zip(("value", "gradient", "jvp outputs", "jvp tangents"), got, want):
            _same(g, w, f"{where}: {part}")
        moved = moved or any(np.any(np.asarray(t) != 0) for t in tree_leaves(want[3])
                             if hasattr(t, "dtype") and t.dtype.kind in "fc")
    assert moved == (name not in ZERO_DERIVATIVE), (
        f"{name}: the tangent is {'non-' * moved}zero; a function with a zero derivative "
        "belongs in ZERO_DERIVATIVE, any other must move with its input")
