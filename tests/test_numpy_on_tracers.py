"""NumPy given a traced value raises `TracerArrayConversionError` (as JAX does), naming the numpy
function, the transform and the user's line, the same under eager grad, jvp, vjp, vmap and
jit: under eager grad it used to compute on the known value, a constant, so the derivative
was silently zero. What must keep working: `ndarray + x` and the other operators, NumPy
functions that call the array's own method (`numpy.sum(x)`), printing a traced value and, under
eager grad, `float(x)` / `if x > 0` (define-by-run). Lists holding traced values given to
funcgrad.numpy are stacked (tests/test_traced_lists.py walks every function).
"""

import re

import numpy
import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax
from funcgrad.test_util import check_grads

X3 = np.array([0.3, 0.5, 0.7], np.float32)


def numpy_sin(x):
    return numpy.sin(x)  # the user's line


def numpy_exp_times(x):
    return numpy.exp(x) * x  # the user's line


def numpy_asarray(x):
    return np.asarray(x) + 1.0  # the user's line


def numpy_norm(x):
    return np.linalg.norm(x) * x  # the user's line


def numpy_concatenate(x):
    return np.concatenate([x, x])  # the user's line


def numpy_sum_of_list(x):
    return np.sum([x, x], axis=0)  # the user's line


def numpy_reduce(x):
    return np.add.reduce(x) * x  # the user's line


def numpy_in_place(x):
    a = np.zeros(3)
    a += x  # the user's line
    return a


NUMPY_CALLS = [  # (function, the numpy function the message names)
    (numpy_sin, "numpy.sin"), (numpy_exp_times, "numpy.exp"), (numpy_asarray, "numpy.asarray"),
    (numpy_norm, "numpy.linalg.norm"), (numpy_concatenate, "numpy.concatenate"),
    (numpy_sum_of_list, "numpy.sum"), (numpy_reduce, "numpy.add.reduce"),
    (numpy_in_place, "numpy.add"),
]


def _loss(f):
    return lambda x: fnp.sum(f(x))


TRANSFORMS = {  # name -> (run f under it, the trace the message names)
    "grad": (lambda f: fg.grad(_loss(f))(X3), "grad/vjp/linearize"),
    "value_and_grad": (lambda f: fg.value_and_grad(_loss(f))(X3), "grad/vjp/linearize"),
    "vjp": (lambda f: fg.vjp(f, X3), "grad/vjp/linearize"),
    "jvp": (lambda f: fg.jvp(f, (X3,), (X3,)), "jvp"),
    "vmap": (lambda f: fg.vmap(f)(np.stack([X3, X3])), "vmap"),
    "jit": (lambda f: fg.jit(f)(X3), "jit(numpy_"),
    "jit(grad)": (lambda f: fg.jit(fg.grad(_loss(f)))(X3), "grad/vjp/linearize"),
    "grad(jit)": (lambda f: fg.grad(_loss(fg.jit(f)))(X3), "jit(numpy_"),
    "hessian": (lambda f: fg.hessian(_loss(f))(X3), "grad/vjp/linearize"),
    "make_jaxpr": (lambda f: fg.make_jaxpr(f)(X3), "make_jaxpr"),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("f, numpy_name", NUMPY_CALLS, ids=[n for _, n in NUMPY_CALLS])
def test_numpy_on_a_traced_value_raises_the_same_error_under_every_transform(
        transform, f, numpy_name):
    run, trace_name = TRANSFORMS[transform]
    with pytest.raises(errors.TracerArrayConversionError) as info:
        run(f)
    msg = str(info.value)
    shape = (f"^{re.escape(numpy_name)}: NumPy was given a value traced by "
             f"`{re.escape(trace_name)}[^`]*` \\(f32\\[3?\\]\\); NumPy computes on constant "
             r"numpy\.ndarrays only.*silently zero\)\n"
             rf"  at .*test_numpy_on_tracers\.py:\d+ \({f.__name__}\)\n"
             r"    .*# the user's line\n"
             r"  hint: use funcgrad\.numpy")
    assert re.match(shape, msg), msg


def test_the_error_is_a_type_error_as_in_jax():
    assert issubclass(errors.TracerArrayConversionError, TypeError)
    assert issubclass(errors.TracerArrayConversionError, errors.FuncgradError)
    with pytest.raises(TypeError, match="numpy.sin"):
        fg.grad(lambda x: numpy.sin(x))(1.0)


def test_the_findings_of_the_issue_raise_instead_of_a_wrong_gradient():
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.sin"):
        fg.grad(lambda x: numpy.sin(x))(1.0)  # was 0 (true 0.5403)
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.exp"):
        fg.grad(lambda x: fnp.sum(numpy.exp(x) * x))(1.0)  # was 2.718 (true 5.437)


def test_a_leaked_tracer_given_to_numpy_raises():
    kept = []
    fg.grad(lambda x: kept.append(x) or x * 2.0)(1.0)
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.asarray"):
        np.asarray(kept[0])


# --- what keeps working ------------------------------------------------------------------------

def _operators(x):
    a = np.array([1.0, 2.0, 3.0], np.float32)
    s = np.float32(2.0)
    q, r = divmod(a + 4.5, x + 1.0)
    return fnp.stack([a + x, a - x, a * x, a / x, s * x, a ** x, x ** a, q + r,
                      (a < x) * x, (a == x) + x, np.sum(x) * x, np.mean(x) * a,
                      np.ndim(x) * x, np.shape(x)[0] * x])


def _operators_reference(x):
    a = fnp.array([1.0, 2.0, 3.0])
    q, r = fnp.divmod(a + 4.5, x + 1.0)
    return fnp.stack([a + x, a - x, a * x, a / x, 2.0 * x, a ** x, x ** a, q + r,
                      (a < x) * x, (a == x) + x, fnp.sum(x) * x, fnp.mean(x) * a, 1 * x, 3 * x])


def test_numpy_operators_and_method_calling_functions_compute_with_funcgrad():
    x = fnp.asarray(X3)
    np.testing.assert_allclose(_operators(x), _operators_reference(x), rtol=1e-6)
    for f in (lambda x: fnp.sum(_operators(x)), fg.jit(lambda x: fnp.sum(_operators(x)))):
        np.testing.assert_allclose(fg.grad(f)(x), fg.grad(lambda x: fnp.sum(
            _operators_reference(x)))(x), rtol=1e-5)
    np.testing.assert_allclose(fg.vmap(_operators)(np.stack([X3, X3 + 1])),
                               np.stack([_operators_reference(x), _operators_reference(x + 1)]),
                               rtol=1e-6)
    fg.config.update("enable_x64", True)
    check_grads(lambda x: fnp.sum(_operators(x)), (np.asarray(X3, np.float64),), order=2)


def test_python_control_flow_and_printing_keep_working_under_eager_grad(capsys):
    def f(x):
        print(x)
        print(repr(x), str(x))
        if x > 0.0 and bool(x < 10.0):
            y = x * float(x) + int(x)  # define-by-run: float(x) is the known value
        else:
            y = -x
        return y + x.item() * 0.0 + len(x.tolist() if x.ndim else [0])
    assert float(fg.grad(f)(2.0)) == 2.0  # d/dx (x * const + const)
    out = capsys.readouterr().out
    assert "Traced<f32[]>with<linearize> = Array(2., dtype=float32)" in out
    with pytest.raises(errors.ConcretizationTypeError, match="bool"):
        fg.jit(f)(2.0)


# --- the internal reads of known values use an explicit accessor -------------------------------

def test_static_arguments_read_known_values_under_eager_grad_and_fail_clearly_under_jit():
    def f(x):
        n = fnp.argmax(x) + 1  # a traced int with a known value
        return fnp.sum(fnp.pad(x, n) * fnp.repeat(x, n).sum()) + fnp.sum(fnp.arange(n + 0.0))
    x = fnp.asarray([0.1, 0.9, 0.3])
    g = fg.grad(f)(x)
    np.testing.assert_allclose(g, [2 * 2 * 1.3] * 3, rtol=1e-6)  # n = 2: (n sum x)^2 / n
    with pytest.raises(errors.ConcretizationTypeError, match="pad: pad_width must be static"):
        fg.jit(f)(x)


def test_scipy_expm_reads_its_scaling_with_the_accessor():
    from funcgrad.scipy.linalg import expm
    a = np.array([[0.0, 1.0], [-1.0, 0.0]], np.float32) * 3.0  # needs squarings
    g = fg.grad(lambda t: fnp.sum(expm(a * t)))(1.0)
    eps = 1e-3
    fd = (fnp.sum(expm(a * (1 + eps))) - fnp.sum(expm(a * (1 - eps)))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-2)


# --- lists holding traced values: the issue's examples, with their true values -----------------

def test_lists_holding_traced_values_differentiate():
    assert float(fg.grad(lambda x: fnp.mean([x, x + 2]))(0.0)) == 1.0  # was 0
    np.testing.assert_allclose(fg.grad(lambda x: fnp.linalg.norm([x, x + 2]))(1.0),
                               4.0 / np.sqrt(10.0), rtol=1e-6)  # was 0
    assert float(fg.grad(lambda x: fnp.sum(fnp.append([x, 2.0], 3.0)))(0.0)) == 1.0
    assert float(fg.grad(lambda x: fnp.sum(fnp.sin((x, 2 * x))))(0.0)) == 3.0
    assert float(fg.grad(lambda x: fnp.linalg.det([[x, 0.0], [0.0, x]]))(2.0)) == 4.0
    _, t = fg.jvp(lambda x: fnp.linalg.det([[x, 0.0], [0.0, x]]), (2.0,), (1.0,))
    assert float(t) == 4.0
    _, t = fg.jvp(lambda x: fnp.mean([x, x + 2]), (0.0,), (1.0,))
    assert float(t) == 1.0


def test_lists_holding_traced_values_under_every_transform():
    def f(x):
        return fnp.sum(fnp.exp([[x, 2.0 * x], (x * x, 1.0)]))
    want = lambda x: np.exp(x) + 2 * np.exp(2 * x) + 2 * x * np.exp(x * x)  # noqa: E731
    for g in (fg.grad(f), fg.jit(fg.grad(f)), fg.grad(fg.jit(f))):
        np.testing.assert_allclose(g(0.5), want(0.5), rtol=1e-6)
    np.testing.assert_allclose(fg.vmap(fg.grad(f))(X3), want(X3), rtol=1e-5)
    np.testing.assert_allclose(fg.grad(fg.grad(lambda x: fnp.sum(fnp.array([x ** 3, x]))))(2.0),
                               12.0)
    fg.config.update("enable_x64", True)
    check_grads(f, (0.5,), order=2)


def test_a_stacked_list_promotes_like_jnp_array_and_is_not_weak():
    def check(x):
        out = fnp.asarray([x, 1, 2.0])
        assert out.dtype == np.float32 and not out.weak_type, out.aval
        out = fnp.sum(fnp.array([[x, 1], [True, 2]]) * 1j)
        assert out.dtype == np.complex64, out
        return x
    fg.grad(check)(1.0)  # a weak Python-scalar input
    fg.make_jaxpr(check)(np.float32(1.0))


def test_indexing_and_at_updates_take_lists_of_traced_values():
    v = fnp.arange(5.0)
    f = lambda x: fnp.sum(v[[fnp.argmax(x), 1]]) * fnp.sum(x)  # noqa: E731  (traced indices)
    np.testing.assert_allclose(fg.grad(f)(X3), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(fg.jit(f)(X3), 3.0 * np.sum(X3), rtol=1e-6)
    g = lambda x: fnp.sum(fnp.zeros(3).at[np.array([0, 2])].set([x * x, 2.0 * x]))  # noqa: E731
    assert float(fg.grad(g)(3.0)) == 8.0
    h = lambda x: fnp.sum(fnp.ones(2).at[0].add([x])) * 0.0 + fnp.sum(  # noqa: E731
        fnp.zeros(2).at[:].subtract([x, x]))
    assert float(fg.grad(h)(1.0)) == -2.0


def test_bad_lists_of_traced_values_name_the_operation():
    with pytest.raises(errors.FuncgradValueError, match=r"sum: cannot stack a list whose "
                       r"entries have different shapes \(2,\), \(\)"):
        fg.grad(lambda x: fnp.sum([fnp.stack([x, x]), x]))(1.0)
    with pytest.raises(errors.FuncgradTypeError, match="add: a list holding traced values is "
                       "not an operand of a lax operation"):
        fg.grad(lambda x: lax.add([x, 1.0], 1.0))(1.0)
    kept = []
    fg.grad(lambda x: kept.append(x) or x)(1.0)
    with pytest.raises(errors.TracerLeakError):
        fnp.sum([kept[0], 1.0])
