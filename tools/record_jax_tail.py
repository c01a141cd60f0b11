"""Records JAX's outputs for the long-tail cases (issue 28, item 8) where NumPy and SciPy do not
give the reference: JAX's edge values, its padding conventions, XLA's rounding.

Run it in a throwaway virtual environment that has JAX (never a funcgrad dependency):

    /work/jaxvenv/bin/python tools/record_jax_tail.py

It writes `tests/golden/jax/tail.npz`: for each case `NAME` its array arguments `NAME/arg/I`
and JAX's outputs `NAME/out/I`. `CASES` below says, for each case, the function (a path
under `jax.` that is the same path under `funcgrad.`), its arguments (arrays, or Python
values kept here), keyword arguments and whether it runs with 64-bit types;
`tests/test_jax_tail_references.py` imports `CASES` and needs no JAX.
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "golden", "jax", "tail.npz")

_INF, _NAN = np.inf, np.nan


class Built:
    """An argument built from the library under test (`jax` here, `funcgrad` in the test):
    `Built(lambda lib: lib.lax.RaggedDotDimensionNumbers(...))`."""

    def __init__(self, make):
        self.make = make
_R = np.random.default_rng(28)


def _floats32():
    """float32 values spanning many binades, ties and the specials."""
    v = _R.normal(size=60) * 10.0 ** _R.integers(-6, 6, 60)
    extra = [1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 65504.0, 65520.0, 1e6, -1e6, 1e-7,
             -1e-7, 0.0, -0.0, _INF, -_INF, _NAN, 3.4e38, 1e-40, 240.0, 250.0, 0.015625]
    return np.concatenate([v, extra]).astype(np.float32)


# name -> (path, args, kwargs, x64)
CASES = {
    "igamma_edges": ("lax.igamma",
                     [np.array([0, 0, 0, 1, 1, 1, 2, _INF, _INF, -1, _NAN, 1, 3.5]),
                      np.array([0, 1, _INF, 0, _INF, -1, _NAN, 1, _INF, 1, 1, 700.0, 2.0])],
                     {}, True),
    "igammac_edges": ("lax.igammac",
                      [np.array([0, 0, 0, 1, 1, 1, 2, _INF, _INF, -1, _NAN, 1, 3.5]),
                       np.array([0, 1, _INF, 0, _INF, -1, _NAN, 1, _INF, 1, 1, 700.0, 2.0])],
                      {}, True),
    "betainc_edges": ("lax.betainc",
                      [np.array([0, 0, 1, 0, 1, 2, 2, -1, 1, 1, 1, 0, 3, _INF, 1, 0.5]),
                       np.array([0, 1, 0, 1, 0, 2, 2, 1, -1, 1, 1, 0, 0, 1, _INF, 2.5]),
                       np.array([.5, 0, 0, 1, 1, 0, 1, .5, .5, -.1, 1.1, 0, .5, .5, .5, .3])],
                      {}, True),
    # (a negative q far from 0 is left out: XLA's summation is wrong there, funcgrad's right)
    "zeta_edges": ("lax.zeta",
                   [np.array([2.0, 1.0, 0.5, 3.0, 3.0, 3.0, 4.0, 2.5, 1.5, 7.0]),
                    np.array([1.0, 1.0, 1.0, -1.0, -1.5, 0.0, -2.25, -1.5, 0.25, 100.0])],
                   {}, True),
    "igamma_grad_a": ("lax.igamma_grad_a",
                      [np.array([0.5, 1.0, 2.0, 5.0, 12.0, 30.0]),
                       np.array([0.3, 2.0, 3.0, 4.0, 15.0, 25.0])], {}, True),
    "random_gamma_grad": ("lax.random_gamma_grad",
                          [np.array([0.5, 1.0, 2.0, 5.0, 12.0, 30.0]),
                           np.array([0.3, 2.0, 3.0, 4.0, 15.0, 25.0])], {}, True),
    **{f"reduce_precision_{e}_{m}": ("lax.reduce_precision", [_floats32(), e, m], {}, False)
       for e, m in ((5, 10), (8, 7), (4, 3), (5, 2), (8, 0), (2, 1), (11, 52))},
    "approx_max_k_sizes": ("lax.approx_max_k",
                           [_R.normal(size=(3, 3000)).astype(np.float32), 5],
                           {"aggregate_to_topk": False, "recall_target": 0.9}, False),
    "approx_min_k_axis0": ("lax.approx_min_k",
                           [_R.normal(size=(2000, 3)).astype(np.float32), 4],
                           {"reduction_dimension": 0, "aggregate_to_topk": False}, False),
    "approx_max_k_override": ("lax.approx_max_k",
                              [_R.normal(size=(4, 2048)).astype(np.float32), 3],
                              {"aggregate_to_topk": False,
                               "reduction_input_size_override": 4096}, False),
    "conv_patches_nchw": ("lax.conv_general_dilated_patches",
                          [_R.normal(size=(2, 3, 5, 6)).astype(np.float32), (2, 3), (1, 2),
                           "SAME"], {"rhs_dilation": (2, 1)}, False),
    "conv_patches_nhwc": ("lax.conv_general_dilated_patches",
                          [_R.normal(size=(2, 5, 6, 3)).astype(np.float32), (3, 2), (2, 1),
                           [(1, 0), (0, 1)]],
                          {"dimension_numbers": ("NHWC", "OIHW", "NHWC"),
                           "lhs_dilation": (1, 2)}, False),
    "conv_local": ("lax.conv_general_dilated_local",
                   [_R.normal(size=(2, 3, 5, 6)).astype(np.float32),
                    _R.normal(size=(4, 3 * 6, 5, 6)).astype(np.float32), (1, 1), "SAME",
                    (2, 3)], {}, False),
    "conv_local_nhwc": ("lax.conv_general_dilated_local",
                        [_R.normal(size=(2, 5, 6, 3)).astype(np.float32),
                         _R.normal(size=(2, 3, 3 * 4, 4)).astype(np.float32), (2, 2),
                         "VALID", (2, 2)],
                        {"dimension_numbers": ("NHWC", "HWIO", "NHWC")}, False),
    "ragged_dot": ("lax.ragged_dot",
                   [_R.normal(size=(7, 3)).astype(np.float32),
                    _R.normal(size=(3, 3, 2)).astype(np.float32),
                    np.array([2, 0, 5], np.int32)], {}, False),
    "ragged_dot_contracting": ("lax.ragged_dot_general",
                               [_R.normal(size=(2, 7)).astype(np.float32),
                                _R.normal(size=(7, 4)).astype(np.float32),
                                np.array([3, 1, 3], np.int32),
                                Built(lambda lib: lib.lax.RaggedDotDimensionNumbers(
                                    (([1], [0]), ([], [])), [1], []))], {}, False),
    "quantile_nearest_ties": ("numpy.quantile",
                              [np.arange(4.0, dtype=np.float32), np.array([0.5, 1 / 6],
                                                                          np.float32)],
                              {"method": "nearest"}, False),
}


def main():
    import jax

    out = {}
    for name, (path, args, kwargs, x64) in CASES.items():
        jax.config.update("jax_enable_x64", x64)
        fn = jax
        for part in path.split("."):
            fn = getattr(fn, part)
        res = fn(*[a.make(jax) if isinstance(a, Built) else a for a in args], **kwargs)
        res = res if isinstance(res, (tuple, list)) else (res,)
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                out[f"{name}/arg/{i}"] = a
        for i, r in enumerate(res):
            out[f"{name}/out/{i}"] = np.asarray(r)
    jax.config.update("jax_enable_x64", False)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **out)
    print(f"wrote {len(CASES)} cases to {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
