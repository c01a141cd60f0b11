"""Threefry as one fused kernel: the 20 rounds (uint32 adds, constant shifts, ors, xors) fuse
into one elementwise kernel on every tier, the numpy tier computes the shifts with ufuncs
(no eager-implementation fallback), and the bits stay JAX's: eager == jit (numpy) == jit
(native C) == the reference values of tests/test_random.py.
"""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_native_backend import HAVE_CC, native_mode
from test_random import APPROX, CASES, _ref

import funcgrad as fg
from funcgrad import lax, random
from funcgrad.backends.numpy import ops as numpy_ops
from funcgrad.compiler import pipeline

SAMPLERS = {
    "bits": lambda k: random.bits(k, (40, 2)),
    "uniform": lambda k: random.uniform(k, (40, 2)),
    "normal": lambda k: random.normal(random.split(k, 40)[3], (40, 2)),
}


def _kernels(fn, backend="numpy"):
    closed = fg.make_jaxpr(fn)(random.PRNGKey(0))
    exe = pipeline.compile_jaxpr(closed, backend=backend)
    return exe, [n.spec for n in exe.program.nodes if hasattr(n, "spec")]


@pytest.mark.parametrize("name", ["bits", "uniform"])
def test_the_rounds_are_one_kernel(name):
    exe, specs = _kernels(SAMPLERS[name])
    rounds = [s for s in specs if any(i.op == "shift_left" for i in s.body)]
    assert len(rounds) == 1, [s.name for s in specs]
    ops = [i.op for i in rounds[0].body]
    assert ops.count("shift_left") == 20 and ops.count("add") >= 20 + 15, ops
    # every shift is a plain ufunc on the numpy tier, not a call of the masked eager impl
    src = exe.as_text()
    assert "np.left_shift(" in src and "np.right_shift(" in src
    assert not re.search(r"_(shift_left|shift_right_logical|div)_\d+\(", src), src


REFERENCE = ["split0", "split42_3", "fold0_7", "bits5", "bits_u8", "bits_u16", "uniform7",
             "uniform_f16", "randint", "normal6"]


def _check_reference(name, got):
    want = _ref(name)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape)
    if name in APPROX:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", REFERENCE)
def test_eager_and_numpy_jit_match_jax(name):
    eager = np.asarray(CASES[name]())
    _check_reference(name, eager)
    np.testing.assert_array_equal(np.asarray(fg.jit(CASES[name], backend="numpy")()), eager)


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler (test_native_backend fails then)")
def test_native_matches_jax_and_eager():
    with native_mode():
        for name in REFERENCE:
            got = np.asarray(fg.jit(CASES[name])())
            _check_reference(name, got)
            np.testing.assert_array_equal(got, np.asarray(CASES[name]()))


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler (test_native_backend fails then)")
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_native_is_one_round_kernel_with_the_same_bits(name):
    fn, key = SAMPLERS[name], random.PRNGKey(7)
    want = np.asarray(fg.jit(fn, backend="numpy")(key))
    with native_mode():
        exe, specs = _kernels(fn, backend="cpu")
        got = np.asarray(exe(key)[0])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(fn(key)), want)
    hashes = 2 if name == "normal" else 1  # normal(split(k)[3]) hashes twice
    assert sum(any(i.op == "shift_left" for i in s.body) for s in specs) == hashes


@given(dt=st.sampled_from([np.uint8, np.uint16, np.uint32, np.uint64, np.int32]),
       amount=st.integers(0, 70), seed=st.integers(0, 2**31))
def test_constant_shifts_in_kernels_equal_eager(dt, amount, seed):
    # in range: the ufunc rule; past the bit width (or a signed dtype): the eager impl's
    # masked XLA semantics. Either way the kernel equals the eager result.
    info = np.iinfo(dt)
    x = np.random.default_rng(seed).integers(info.min, info.max, (5, 3), dtype=dt,
                                             endpoint=True)
    s = np.dtype(dt).type(amount % (info.max + 1) if info.min == 0 else amount)

    def f(v):
        w = lax.add(v, np.dtype(dt).type(1))  # a fused chain around the shifts
        return lax.bitwise_or(lax.shift_left(w, s), lax.shift_right_logical(w, s))

    np.testing.assert_array_equal(np.asarray(fg.jit(f, backend="numpy")(x)),
                                  np.asarray(f(x)))


def test_the_shift_rule_declines_what_it_cannot_print():
    rule = numpy_ops.elementwise_rule("shift_left")
    u32 = np.dtype(np.uint32)
    assert rule(["a", "b"], [u32, u32], {}, [None, np.uint32(3)])[1] == "ufunc"
    assert rule(["a", "b"], [u32, u32], {}, [None, np.uint32(32)]) is None
    assert rule(["a", "b"], [u32, u32], {}, [None, None]) is None
    i32 = np.dtype(np.int32)
    assert rule(["a", "b"], [i32, i32], {}, [None, np.int32(3)]) is None
