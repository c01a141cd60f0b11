"""Shared hypothesis strategies and comparison helpers of the tests/test_numpy_*.py files:
shapes with size-0 and size-1 axes, broadcastable shape pairs, arrays by dtype and domain,
and `assert_matches` (values vs a NumPy reference plus the exact funcgrad dtype).
"""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

F32, I32, BOOL = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)
DTYPES = (F32, I32, BOOL)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
nonempty_shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
pair_shapes = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                min_side=0, max_side=4)
seeds = st.integers(0, 2**31 - 1)

# value domains for functions defined on part of the real line
DOMAINS = {
    "any": lambda r, s: r.standard_normal(s) * 3,
    "small": lambda r, s: r.uniform(-4, 4, s),
    "pos": lambda r, s: r.uniform(0.1, 5, s),
    "nonneg": lambda r, s: r.uniform(0, 5, s),
    "unit": lambda r, s: r.uniform(-0.95, 0.95, s),
    "ge1": lambda r, s: r.uniform(1.05, 5, s),
    "gtm1": lambda r, s: r.uniform(-0.9, 5, s),
    "nonzero": lambda r, s: np.where(r.random(s) < 0.5, -1, 1) * r.uniform(0.2, 5, s),
}


def make_array(seed, shape, dtype, domain="any"):
    """A NumPy array of `shape` and `dtype` with values from `domain` (ints: small ints)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    vals = DOMAINS[domain](rng, shape)
    if dtype.kind in "iu":
        vals = np.round(vals)
        if domain in ("pos", "nonzero", "ge1"):
            vals = np.where(vals == 0, 1, vals)
    return np.asarray(vals).astype(dtype)


def assert_matches(got, want, dtype=None, rtol=1e-5, atol=1e-6):
    """`got` (a funcgrad array) equals the NumPy reference `want` in values (NaNs equal) and
    shape, and has exactly `dtype` when given."""
    g = np.asarray(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape} != expected {w.shape}"
    if dtype is not None:
        assert g.dtype == np.dtype(dtype), f"dtype {g.dtype} != expected {np.dtype(dtype)}"
    if g.dtype.kind in "biu" and w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)


def axes_for(ndim, draw_tuple=True):
    """A strategy for `axis` arguments of an ndim-array: None, an int (maybe negative), or a
    tuple of distinct axes."""
    opts = [st.none()]
    if ndim:
        opts.append(st.integers(-ndim, ndim - 1))
        if draw_tuple:
            opts.append(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)
                        .map(tuple))
    return st.one_of(*opts)
