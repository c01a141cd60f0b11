"""User errors are not funcgrad bugs: an exception raised inside a `debug.callback` propagates as
itself (same object, with a note naming the callback and the line); malformed or
attribute-walking `debug.print` formats are rejected when traced; arrays too large for memory
give a FuncgradMemoryError ("out of memory: needed N bytes for <op>") naming the line, at once.
"""

import re

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import debug, errors, lax
from funcgrad import random as fgr

_THIS = "test_debug_and_memory_errors.py"


class CallbackFailed(ValueError):
    pass


def _failing_callback(seen):
    def cb(v):
        seen.append(v)
        raise seen[0] if isinstance(seen[0], Exception) else CallbackFailed("bad value")
    return cb


def _f(cb):
    def f(x):
        debug.callback(cb, x)
        return (x * x).sum()
    return f


@pytest.mark.parametrize("transform", ["eager", "grad", "vmap", "jvp"])
def test_callback_exception_propagates_as_itself(transform):
    err = CallbackFailed("bad value")
    f = _f(_failing_callback([err]))
    x = fnp.arange(3.0)
    run = {"eager": lambda: f(x), "grad": lambda: fg.grad(f)(x),
           "vmap": lambda: fg.vmap(f)(fnp.ones((2, 3))),
           "jvp": lambda: fg.jvp(f, (x,), (x,))}[transform]
    with pytest.raises(CallbackFailed) as info:
        run()
    assert info.value is err  # the user's own exception object, not a wrapper
    assert not isinstance(info.value, errors.FuncgradError)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "debug.callback" in notes and "cb" in notes
    assert re.search(_THIS + r":\d+", notes), notes
    try:  # `except ValueError` still catches it, as it would without funcgrad
        run()
    except ValueError:
        pass


def test_callback_exception_under_jit_is_marked_as_the_users():
    # The compiled program's failure wrapper (backends/numpy/runtime.py, jit_cache.reraise)
    # re-raises marked exceptions as themselves, under jit, jit(grad) and grad(jit) alike.
    for wrap in (lambda g: fg.jit(g), lambda g: fg.jit(fg.grad(lambda x: fnp.sum(g(x)))),
                 lambda g: fg.grad(lambda x: fnp.sum(fg.jit(g)(x)))):
        err = CallbackFailed("bad value")
        with pytest.raises(CallbackFailed) as info:
            wrap(_f(_failing_callback([err])))(fnp.arange(3.0))
        assert info.value is err and errors.is_user_error(err)


def test_callback_must_be_callable():
    with pytest.raises(errors.FuncgradTypeError, match="debug.callback.*callable") as info:
        debug.callback(None, fnp.ones(2))
    assert _THIS in str(info.value)


@pytest.mark.parametrize("fmt, args, kwargs, cls, fragment", [
    ("{", (1.0,), {}, errors.FuncgradValueError, "Single '{'"),
    ("{} {}", (1.0,), {}, errors.FuncgradValueError, "out of range"),
    ("{0.__class__.__mro__}", (1.0,), {}, errors.FuncgradValueError, "attribute access"),
    ("{x.__globals__}", (), {"x": 1.0}, errors.FuncgradValueError, "attribute access"),
    ("{0[0]}", (1.0,), {}, errors.FuncgradValueError, "indexing"),
    ("{!z}", (1.0,), {}, errors.FuncgradValueError, "conversion"),
    ("{} {0}", (1.0,), {}, errors.FuncgradValueError, "cannot switch"),
    ("{:d}", (1.0,), {}, errors.FuncgradValueError, "format code 'd'"),
    ("{y}", (1.0,), {}, errors.FuncgradValueError, "KeyError"),
    (3, (1.0,), {}, errors.FuncgradTypeError, "must be a string"),
    (None, (1.0,), {}, errors.FuncgradTypeError, "must be a string"),
    ("{}", (1.0, 2.0), {}, errors.FuncgradValueError, "unused arguments [1]"),
    ("{x}", (), {"x": 1.0, "y": 2.0}, errors.FuncgradValueError, "unused arguments ['y']"),
])
@pytest.mark.parametrize("under_jit", [False, True])
def test_bad_print_formats_are_rejected_when_traced(fmt, args, kwargs, cls, fragment,
                                                     under_jit, capsys):
    arrays = [fnp.asarray(a) for a in args]
    kw = {k: fnp.asarray(v) for k, v in kwargs.items()}

    def f(*xs):
        debug.print(fmt, *xs, **kw)
        return 0.0
    with pytest.raises(cls) as info:
        fg.jit(f)(*arrays) if under_jit else f(*arrays)
    msg = str(info.value)
    assert "debug.print" in msg and fragment in msg, msg
    assert re.search(_THIS + r":\d+", msg) and "debug.print(fmt" in msg, msg
    assert capsys.readouterr().out == ""  # nothing printed, nothing half-run


def test_good_print_formats_print_eagerly_and_under_jit_and_vmap(capsys):
    x = fnp.arange(3.0)

    def f(v, n):
        debug.print("v={0} n={n:.2f} {s!r} {0:.1f}", v, n=n, s="tag")
        return v
    f(x, 2.0)
    fg.jit(f)(x, 2.0)
    fg.vmap(lambda v: debug.print("{:.1f}", v) or v)(x)  # once per example, as in JAX
    out = capsys.readouterr().out.splitlines()
    assert out == ["v=[0. 1. 2.] n=2.00 'tag' [0.0 1.0 2.0]"] * 2 + ["0.0", "1.0", "2.0"]


# --- out of memory ----------------------------------------------------------------------------

def _check_memory_error(info, op, nbytes):
    e = info.value
    assert isinstance(e, errors.FuncgradMemoryError) and isinstance(e, MemoryError)
    msg = str(e)
    assert f"{op}: out of memory: needed {nbytes} bytes" in msg, msg
    assert re.search(_THIS + r":\d+", msg), msg


@pytest.mark.parametrize("case, op, nbytes", [
    (lambda: lax.iota(np.int32, 2**40), "iota", 4 * 2**40),
    (lambda: fnp.zeros((2**20, 2**20)) + 1.0, "add", 4 * 2**40),
    (lambda: fnp.arange(2**40), "iota", 4 * 2**40),
    (lambda: fnp.zeros(2**70), "broadcast_in_dim", 4 * 2**70),
    (lambda: fgr.normal(fgr.PRNGKey(0), (2**40,)), "random.normal", 4 * 2**40),
    (lambda: fgr.uniform(fgr.PRNGKey(0), (2**20, 2**20)), "random.uniform", 4 * 2**40),
    (lambda: fg.grad(lambda s: (fnp.broadcast_to(s, (2**20, 2**20)) * s).sum())(1.0), "mul",
     4 * 2**40),
    (lambda: fg.vmap(lambda s: fnp.ones((2**20, 2**20)) * s)(fnp.ones(3)), "mul",
     3 * 4 * 2**40),
])
def test_impossible_sizes_raise_memory_errors_at_once(case, op, nbytes):
    # numpy refuses these allocations immediately (they exceed any machine's memory), so the
    # test allocates nothing; funcgrad reports the op, its output types and the bytes.
    with pytest.raises(MemoryError) as info:
        case()
    _check_memory_error(info, op, nbytes)


def test_memory_error_names_the_output_type():
    with pytest.raises(errors.FuncgradMemoryError, match=r"int32\[1099511627776\]"):
        lax.iota(np.int32, 2**40)


@pytest.mark.parametrize("native", ["off", "sync"])
@pytest.mark.parametrize("case", [
    lambda: fg.jit(fnp.tile, static_argnums=1)(fnp.ones(()), (2**40,)),  # eagerly a view
    lambda: fg.jit(lambda v: fnp.zeros((2**40,)) + v[0])(fnp.ones(4)),
], ids=["tile", "broadcast-output"])
def test_out_of_memory_for_a_compiled_programs_output_is_a_memory_error(native, case):
    # the output is materialized by a line of no IR equation (numpy and native backends)
    fg.config.update("native", native)
    with pytest.raises(errors.FuncgradMemoryError) as info:
        case()
    _check_memory_error(info, "jit", 4 * 2**40)
    assert "float32[1099511627776]" in str(info.value)


def test_out_of_memory_inside_a_compiled_program_names_the_operation():
    with pytest.raises(errors.FuncgradMemoryError, match="iota: out of memory") as info:
        fg.jit(lambda: lax.iota(np.int32, 2**40))()
    assert isinstance(info.value, MemoryError)
    with pytest.raises(errors.FuncgradMemoryError, match="out of memory"):
        fg.jit(lambda x: fnp.sin(fnp.broadcast_to(x, (2**20, 2**20))))(fnp.ones(1))
