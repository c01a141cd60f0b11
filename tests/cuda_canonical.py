"""Canonical CUDA kernels (test cases, not part of the library): small funcgrad functions
that each fuse into exactly one kernel, covering every strategy, index pattern and dtype
family the CUDA renderer handles. The tests (`test_cuda_*.py`) run them through the CPU
emulation and the CUDA compilers; `tools/gpu/validate.py` (which puts this folder on
`sys.path`) runs them on a GPU against numpy.

    import cuda_canonical as canonical
    for case in canonical.CASES:
        plan, inputs, expected = case.build(rng)     # plan for case.device
"""

import math
from dataclasses import dataclass

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax, make_jaxpr, random
from funcgrad.backends.cuda.plan import DeviceInfo, plan_kernel
from funcgrad.compiler.fusion import fuse
from funcgrad.compiler.pipeline import optimize
from funcgrad.config import config

SMALL = DeviceInfo(arch=90, sm_count=1, max_threads_per_sm=512)  # few blocks: cheap to emulate
SPLIT = DeviceInfo(arch=90, sm_count=4, max_threads_per_sm=2048)  # makes few rows split


@dataclass
class Case:
    """`fn(*args)` with args from `make(rng)` fuses into one kernel; `strategy` (and
    `splits` > 1 when `split`) is what the plan must choose on `device`."""

    name: str
    fn: object
    make: object
    strategy: str = None
    split: bool = False
    device: DeviceInfo = SMALL
    rtol: float = 2e-6
    x64: bool = False

    def trace(self, args):
        prev = config.enable_x64
        config.update("enable_x64", self.x64)
        try:
            closed = optimize(make_jaxpr(self.fn)(*args))
        finally:
            config.update("enable_x64", prev)
        program = fuse(closed)
        if len(program.nodes) != 1 or not program.kernels:
            raise AssertionError(f"{self.name}: expected one kernel, got\n{program.summary()}")
        return program

    def build(self, rng, device=None):
        """(plan, input arrays in the kernel's order, expected outputs in its order)."""
        args = self.make(rng)
        program = self.trace(args)
        node, j = program.kernels[0], program.jaxpr
        inputs = [np.ascontiguousarray(args[j.invars.index(v)]) for v in node.inputs]
        prev = config.enable_x64
        config.update("enable_x64", self.x64)
        try:
            out = self.fn(*[fnp.asarray(a) for a in args])
        finally:
            config.update("enable_x64", prev)
        out = out if isinstance(out, (tuple, list)) else (out,)
        expected = [np.asarray(out[j.outvars.index(v)]) for v in node.outputs]
        return plan_kernel(node.spec, device or self.device), inputs, expected


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _cases():
    def nan_rows(rng):
        x = _f32(rng, 100, 50)
        x[3, 7] = np.nan
        x[10, :] = -np.inf
        return (x,)

    def ints(rng):
        i = rng.integers(-1000, 1000, (257, 33)).astype(np.int32)
        k = rng.integers(-3, 4, (257, 33)).astype(np.int32)
        return i, k

    def bf16_pair(rng):
        y = _f32(rng, 1000).astype(fnp.bfloat16)
        y[:3] = [np.nan, np.inf, -0.0]
        return _f32(rng, 1000) * 3, y

    def bits(rng):
        x = rng.integers(0, 2**32, (300,), dtype=np.uint32)
        s = rng.integers(0, 40, (300,)).astype(np.uint32)
        return x, s

    def threefry_keys(rng):  # one key per element, as vmap over keys gives
        return tuple(rng.integers(0, 2**32, (3, 1000), dtype=np.uint32))

    cases = [
        Case("ew_odd_size", lambda a, b, c: fnp.tanh(a * b + c),
             lambda r: (_f32(r, 100003), _f32(r, 100003), _f32(r, 100003)), "elementwise"),
        Case("ew_size1", lambda a: fnp.sin(a) * 2.0, lambda r: (_f32(r, 1),), "elementwise"),
        Case("ew_scalar_broadcast", lambda a, s: a * s + 1.0,
             lambda r: (_f32(r, 37, 53), _f32(r)), "elementwise"),
        Case("ew_row_col_broadcast", lambda a, b, c: fnp.tanh(a * b + c),
             lambda r: (_f32(r, 37, 1, 129), _f32(r, 1, 53, 129), _f32(r, 129)), "elementwise"),
        Case("ew_middle_axis", lambda a, b: a * b - b,
             lambda r: (_f32(r, 7, 1, 9), _f32(r, 7, 5, 9)), "elementwise"),
        Case("ew_transposed", lambda a, b: a.T + b,
             lambda r: (_f32(r, 33, 17), _f32(r, 17, 33)), "elementwise"),
        Case("ew_vec_relu_bias", lambda x, b: fnp.maximum(x + b, 0.0),
             lambda r: (_f32(r, 64, 256), _f32(r, 256)), "elementwise"),
        Case("ew_vec_where_mask", lambda x: fnp.where(x > 0, x, 0.1 * x),
             lambda r: (_f32(r, 64, 256),), "elementwise"),
        Case("ew_vec_bool", lambda x, m: (x > 0) & m | (x < -2.0),
             lambda r: (_f32(r, 64, 256), r.random((64, 256)) < 0.5), "elementwise"),
        Case("ew_int_arith", lambda i, k: lax.rem(lax.div(i * 1000003 + k, k), k + 7),
             ints, "elementwise"),
        Case("ew_uint_bits", lambda x, s: (lax.shift_left(x, s) ^ lax.shift_right_logical(x, s))
             | lax.population_count(x) + lax.shift_right_arithmetic(x, s), bits,
             "elementwise"),
        Case("ew_threefry", lambda k1, k2, x: lax.bitwise_xor(*random.threefry2x32(
            k1, k2, np.uint32(0), x)), threefry_keys, "elementwise"),
        Case("ew_bool_logic", lambda a, b: (a > 0) & ~(b > 0.5) | (a < -1.0),
             lambda r: (_f32(r, 1000), _f32(r, 1000)), "elementwise"),
        Case("ew_float16", lambda x, h: x.astype(np.float16) * 2.0 + h,
             lambda r: (_f32(r, 999), _f32(r, 999).astype(np.float16)), "elementwise",
             rtol=2e-3),
        Case("ew_float64", lambda x: fnp.exp(x) + fnp.log1p(x * x),
             lambda r: (r.standard_normal(5001),), "elementwise", rtol=1e-12, x64=True),
        Case("ew_math", lambda x, y: (fnp.expm1(x) + fnp.sqrt(fnp.abs(y)) * fnp.sign(x)
                                      + fnp.arctan2(x, y) + fnp.floor(x) - fnp.ceil(y)
                                      + fnp.round(x * 3) + lax.rsqrt(fnp.abs(x) + 1)
                                      + lax.logistic(y) + lax.erf(x) + fnp.cos(y)
                                      + fnp.clip(x, -0.5, 0.5) + lax.integer_pow(y, 3)
                                      + lax.integer_pow(x + 3.0, -2)),
             lambda r: (_f32(r, 2000), _f32(r, 2000)), "elementwise", rtol=2e-5),
        Case("ew_special", lambda x: lax.lgamma(x) + lax.digamma(x) + lax.erf_inv(x / 8.0),
             lambda r: (np.abs(_f32(r, 500)) * 3 + 0.1,), "elementwise", rtol=2e-5),
        Case("ew_nan_max_min", lambda x, y: fnp.maximum(x, y) + 2.0 * fnp.minimum(x, y),
             lambda r: (np.array([1, np.nan, 3, -np.inf], np.float32),
                        np.array([np.nan, 2, np.inf, 0], np.float32)), "elementwise"),
        Case("ew_convert", lambda x, i: (x.astype(np.int32) + i).astype(np.float32) / 3.0
             + (x > 0).astype(np.float32),
             lambda r: (_f32(r, 777) * 100, r.integers(-50, 50, 777).astype(np.int32)),
             "elementwise"),
        Case("sum_k1", lambda x: x.sum(1), lambda r: (_f32(r, 500, 1),), "thread_per_row"),
        Case("sum_k5", lambda x: (x * 2.0).sum(1), lambda r: (_f32(r, 2000, 5),),
             "thread_per_row"),
        Case("sum_k31", lambda x: x.sum(-1), lambda r: (_f32(r, 300, 31),), "warp_per_row"),
        Case("sum_k33_3d_rows", lambda x: fnp.exp(x).sum(-1), lambda r: (_f32(r, 7, 9, 33),),
             "warp_per_row"),
        Case("sum_k257_broadcast", lambda a, b: (a[:, None] * b[None, :]).sum(1),
             lambda r: (_f32(r, 40), _f32(r, 257)), "warp_per_row"),
        Case("max_k1000", lambda x: x.max(1), lambda r: (_f32(r, 50, 1000),), "warp_per_row"),
        Case("sum_k4097_block", lambda x: fnp.tanh(x).sum(1), lambda r: (_f32(r, 20, 4097),),
             "block_per_row", rtol=1e-5),
        Case("sum_split_block", lambda x: x.sum(1), lambda r: (_f32(r, 4, 20000),),
             "block_per_row", split=True, device=SPLIT, rtol=1e-5),
        Case("sum_split_column", lambda x: x.sum(0), lambda r: (_f32(r, 5000, 3),),
             "thread_per_row", split=True, device=SPLIT, rtol=1e-5),
        Case("sum_columns", lambda x: x.sum(0), lambda r: (_f32(r, 1000, 64),),
             "thread_per_row", split=True, rtol=1e-5),
        Case("sum_axes_0_2", lambda x: x.sum((0, 2)), lambda r: (_f32(r, 6, 7, 8),),
             "warp_per_row"),
        Case("max_nan_inf", lambda x: x.max(1), nan_rows, "warp_per_row"),
        Case("min_columns", lambda x: x.min(0), nan_rows, "thread_per_row"),
        Case("two_reductions", lambda x: (fnp.tanh(x).sum(1), (fnp.tanh(x) ** 2).sum(1)),
             lambda r: (_f32(r, 64, 300),), "warp_per_row", rtol=1e-5),
        Case("elementwise_and_sum", lambda x: (fnp.tanh(x), fnp.tanh(x).sum(1)),
             lambda r: (_f32(r, 33, 700),), "warp_per_row", rtol=1e-5),
        Case("int_count", lambda x: (x > 0).astype(np.int32).sum(1),
             lambda r: (_f32(r, 100, 40),), "warp_per_row"),
        # lax's reduce_sum: jnp's sum of float16 accumulates in float32 (as JAX's)
        Case("float16_sum", lambda x: lax.reduce_sum(x, (1,)),
             lambda r: (_f32(r, 64, 300).astype(np.float16),), "warp_per_row", rtol=2e-3),
        Case("centered_squares", lambda x, m: ((x - m[:, None]) ** 2).sum(1),
             lambda r: (_f32(r, 70, 90), _f32(r, 70)), "warp_per_row", rtol=1e-5),
        # bfloat16: exact operations give eager's bits (rtol 0): rounded after each one
        Case("ew_bfloat16_exact", lambda x, y: fnp.maximum(
            (x.astype(fnp.bfloat16) * y + y) / (fnp.sqrt(fnp.abs(y)) + 1.0), y - 0.5),
             bf16_pair, "elementwise", rtol=0),
        Case("ew_bfloat16_math", lambda x: fnp.tanh(fnp.exp(x) * 0.5) - lax.rsqrt(x * x + 1.0),
             lambda r: (_f32(r, 3001).astype(fnp.bfloat16),), "elementwise", rtol=8e-3),
        Case("bfloat16_sum", lambda x: lax.reduce_sum(x * x, (1,)),
             lambda r: (_f32(r, 64, 300).astype(fnp.bfloat16),), "warp_per_row", rtol=8e-3),
        Case("bfloat16_max", lambda x: x.max(1), lambda r: (
            _f32(r, 40, 77).astype(fnp.bfloat16),), "warp_per_row", rtol=0),
    ]
    return cases


CASES = _cases()


def by_name(name):
    return next(c for c in CASES if c.name == name)


def tolerance_ok(got, want, rtol):
    """Elementwise closeness for kernel results: exact for integers and bools, NaNs in the
    same places, relative `rtol` (with an absolute floor scaled by the data) for floats."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind in "biu":
        return bool((got == want).all())
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not (np.isnan(g) == np.isnan(w)).all():
        return False
    ok = ~np.isnan(w)
    scale = max(1.0, float(np.abs(w[ok & np.isfinite(w)]).max(initial=0)))
    inf = ok & ~np.isfinite(w)
    return bool((g[inf] == w[inf]).all() and np.allclose(
        g[ok & ~inf], w[ok & ~inf], rtol=rtol, atol=rtol * scale * math.sqrt(10)))
