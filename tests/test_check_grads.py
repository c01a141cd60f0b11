"""`funcgrad.test_util.check_grads` passes for correct rules and catches wrong ones: a wrong
jvp, a wrong transpose, and a rule that is right at first order but wrong at second."""

import numpy as np
import pytest

import funcgrad as fg
from funcgrad import lax
from funcgrad.interpreters import ad, batching
from funcgrad.lax.utils import unop
from funcgrad.test_util import check_grads, numerical_jvp, rand_like


@pytest.fixture
def temp_prims():
    """Make primitives with the `unop` factory; their rules are removed after the test."""
    made = []

    def make(name, impl):
        p = unop(name, impl)
        made.append(p)
        return p
    yield make
    for p in made:
        for table in (ad.jvp_rules, ad.transpose_rules, batching.batch_rules):
            table.pop(p, None)


# --- correct rules pass -------------------------------------------------------------------------
def test_passes_for_correct_rules():
    check_grads(lax.sin, (np.float32(0.3),), order=2)
    check_grads(lax.mul, (np.arange(3.0), np.ones(3) * 0.5), order=2)
    check_grads(lambda x: lax.exp(lax.sin(x)), (np.linspace(-1, 1, 4),), order=3)


def test_pytrees_integers_and_complex():
    def f(params, n):
        a, b = params["a"], params["b"]
        return {"y": (lax.mul(a, lax.cos(b)), lax.tanh(a)), "count": n}
    params = {"a": np.array([0.1, 0.7]), "b": np.array([0.3, -0.4])}
    check_grads(f, (params, np.int32(3)), order=2)
    check_grads(lambda z: lax.mul(z, lax.exp(z)), (np.array([0.2 + 0.5j, -1 + 0.1j]),), order=2)


def test_runs_in_float64_and_restores_x64():
    seen = []

    def f(x):
        seen.append(x.dtype)
        return lax.sin(x)
    assert not fg.config.enable_x64
    check_grads(f, (np.ones(2, np.float32),), order=1)
    assert set(seen) == {np.dtype(np.float64)}
    assert not fg.config.enable_x64


def test_modes_and_unknown_mode():
    check_grads(lax.cos, (0.5,), order=2, modes=("fwd",))
    check_grads(lax.cos, (0.5,), order=2, modes=("rev",))
    with pytest.raises(ValueError, match="mode"):
        check_grads(lax.cos, (0.5,), modes=("backward",))


# --- wrong rules fail ---------------------------------------------------------------------------
def test_wrong_jvp_fails_in_both_modes(temp_prims):
    bad_sin = temp_prims("bad_sin", np.sin)
    ad.defjvp(bad_sin, lambda t, x, out: lax.mul(t, lax.sin(x)))  # should be cos(x)
    args = (np.array([0.3, 1.1]),)
    with pytest.raises(AssertionError, match=r"JVP: tangent mismatch"):
        check_grads(bad_sin.bind, args, order=1, modes=("fwd",))
    with pytest.raises(AssertionError, match=r"VJP: <vjp\(ct\), t>"):
        check_grads(bad_sin.bind, args, order=1, modes=("rev",))
    assert not fg.config.enable_x64  # restored after a failure too


def test_failure_names_the_leaf(temp_prims):
    bad_exp = temp_prims("bad_exp", np.exp)
    ad.defjvp(bad_exp, lambda t, x, out: mul2(t, out))

    def f(x, y):
        return {"good": lax.sin(y), "bad": bad_exp.bind(x)}
    with pytest.raises(AssertionError) as info:
        check_grads(f, (np.array([0.1, 0.2]), np.array([0.5])), order=1, modes=("fwd",))
    msg = str(info.value)
    assert "['bad']" in msg and "['good']" not in msg and "max abs error" in msg
    with pytest.raises(AssertionError) as info:
        check_grads(f, (np.array([0.1, 0.2]), np.array([0.5])), order=1, modes=("rev",))
    assert "input leaf [0]" in str(info.value)


def mul2(t, out):
    return lax.mul(lax.mul(t, out), 2.0)


def test_wrong_transpose_fails_only_in_reverse(temp_prims):
    scale = temp_prims("scale3", lambda x: 3 * x)
    ad.deflinear(scale, lambda ct, x: [lax.mul(ct, 2.0)])  # should be 3 * ct
    check_grads(scale.bind, (np.array([1.0, 2.0]),), order=2, modes=("fwd",))
    with pytest.raises(AssertionError, match="VJP"):
        check_grads(scale.bind, (np.array([1.0, 2.0]),), order=1, modes=("rev",))


def test_second_order_bug_needs_order_2(temp_prims):
    my_cos = temp_prims("my_cos", np.cos)
    ad.defjvp(my_cos, lambda t, x, out: lax.mul(t, lax.sin(x)))  # sign error
    my_sin = temp_prims("my_sin", np.sin)
    ad.defjvp(my_sin, lambda t, x, out: lax.mul(t, my_cos.bind(x)))  # right
    args = (np.array([0.4, -0.9]),)
    check_grads(my_sin.bind, args, order=1)
    with pytest.raises(AssertionError, match="JVP of JVP"):
        check_grads(my_sin.bind, args, order=2, modes=("fwd",))
    with pytest.raises(AssertionError, match="of VJP"):
        check_grads(my_sin.bind, args, order=2, modes=("rev",))


def test_wrong_tangent_dtype_fails(temp_prims):
    p = temp_prims("lossy", np.sin)
    ad.defjvp(p, lambda t, x, out: lax.convert_element_type(lax.mul(t, lax.cos(x)), np.float32))
    with pytest.raises(AssertionError, match="tangent leaf"):
        check_grads(p.bind, (np.array([0.5]),), order=1, modes=("fwd",))


# --- helpers ------------------------------------------------------------------------------------
def test_rand_like_and_numerical_jvp():
    rng = np.random.default_rng(0)
    r = rand_like(rng, np.zeros((2, 3), np.float32))
    assert r.shape == (2, 3) and r.dtype == np.float32 and np.abs(r).sum() > 0
    assert (rand_like(rng, np.zeros(3, np.int32)) == 0).all()
    assert rand_like(0, np.complex64(1j)).dtype == np.complex64
    fg.config.update("enable_x64", True)  # reset by conftest
    with np.errstate(all="raise"):
        got = numerical_jvp(lambda x: lax.mul(x, x), (np.array([3.0]),), (np.array([1.0]),))
    np.testing.assert_allclose(got[0], [6.0], rtol=1e-6)
