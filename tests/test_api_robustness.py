"""Bad arguments to any public function of funcgrad.lax and funcgrad.numpy give a funcgrad
error naming the function, never a raw numpy/Python exception nor a "funcgrad bug"
(FuncgradInternalError). Every function is called with plausible arguments, then with each
argument in turn replaced by a bad value (None, a string, an object, ragged and nested lists,
float, negative and out-of-range axes, wrong-rank and wrong-dtype arrays, a huge int, an
object whose repr raises, ...), eagerly and, for the lax layer, inside a trace.
"""

import inspect

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors, lax


class BadRepr:
    def __repr__(self):
        raise RuntimeError("a __repr__ that raises")


def _arr():
    return fnp.ones((2, 3))


# Plausible values by parameter name; anything else gets a float32[2, 3] array.
GOOD = {
    "axis": 0, "axes": (0,), "axis1": 0, "axis2": 1, "dimension": 0, "dimensions": (0,),
    "shape": (2, 3), "new_sizes": (3, 2), "dtype": fnp.float32, "new_dtype": fnp.float32,
    "index_dtype": fnp.int32, "permutation": (1, 0), "size": 3, "k": 1, "num": 3, "n": 3,
    "N": 3, "M": 3, "m": 3, "offset": 0, "decimals": 0, "repeats": 2, "reps": 2, "source": 0,
    "destination": 1, "shift": 1, "indices_or_sections": 2, "fill_value": 0.0, "start": 0,
    "stop": 3, "step": 1, "lower": 0, "upper": 2, "axis_name": "i", "subscripts": "ij->ji",
    "pad_width": 1, "padding_value": 0.0, "padding_config": ((0, 0, 0), (1, 1, 0)),
    "start_indices": (0, 0), "limit_indices": (1, 2), "slice_sizes": (1, 2),
    "start_index": 0, "limit_index": 1, "slice_size": 1, "broadcast_dimensions": (0, 1),
    "window_dimensions": (1, 1), "window_strides": (1, 1), "padding": "VALID",
    "init_value": 0.0, "computation": lax.add, "rounding_method": 0,
    "f": lambda *a: a[0] if len(a) == 1 else a, "body_fun": lambda *a: a[-1],
    "cond_fun": lambda c: False, "true_fun": lambda *a: 0.0, "false_fun": lambda *a: 1.0,
    "branches": (lambda *a: 0.0,), "pred": True, "index": 0, "init_val": 0.0, "init": 0.0,
    "which": True, "kind": "real floating", "side": "left", "dims": (2, 3),
    "dimension_numbers": (((1,), (0,)), ((), ())),
}

BAD = {
    "None": None, "str": "str", "object": object(), "ragged": [[1, 2], [3]],
    "nested": ((1, (2,)), 3), "float": 1.5, "negative": -1, "axis_7": 7, "axis_-7": -7,
    "rank3": "RANK3", "rank0": "RANK0", "bool_array": "BOOL", "complex": 1j, "dict": {"a": 1},
    "nan": float("nan"), "huge_int": 2**70, "function": lambda x: x, "bad_repr": BadRepr(),
    "strings": ["a", "b"], "empty_tuple": (), "object_array": np.array([object()]),
}


def _value(v):
    if isinstance(v, str) and v in ("RANK3", "RANK0", "BOOL"):
        return {"RANK3": lambda: fnp.ones((2, 3, 4)), "RANK0": lambda: fnp.ones(()),
                "BOOL": lambda: fnp.ones((2, 3), bool)}[v]()
    return v


def _good(name):
    if name in ("indices",):
        return fnp.zeros((2, 3), fnp.int32)
    if name in ("operands", "arrays", "tup"):
        return (_arr(), _arr())
    if name == "multi_index":
        return (fnp.zeros(2, fnp.int32), fnp.zeros(2, fnp.int32))
    return GOOD[name] if name in GOOD else _arr()


def _public(module, prefix):
    names = module.__all__ if hasattr(module, "__all__") else dir(module)
    return [(f"{prefix}.{n}", getattr(module, n)) for n in sorted(names)
            if not n.startswith("_") and inspect.isfunction(getattr(module, n))]


# lax.axis_index / axis_size need a bound axis name: they have their own tests.
FUNCTIONS = [(q, f) for q, f in _public(lax, "lax") + _public(fnp, "numpy")
             if q not in ("lax.axis_index", "lax.axis_size")]


def _calls(fn):
    """(label, args, kwargs): the plausible call, then each argument made bad in turn."""
    pos, optional = [], []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            pos.append((p.name, _good(p.name)))
        elif p.kind == p.VAR_POSITIONAL:
            pos.append(("*" + p.name, _arr()))
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            optional.append(p.name)
    base = [v for _, v in pos]
    yield "plausible call", base, {}
    for i, (name, _) in enumerate(pos):
        for label, bad in BAD.items():
            args = list(base)
            args[i] = bad
            yield f"{name}={label}", args, {}
    for name in optional:
        for label, bad in BAD.items():
            yield f"{name}={label}", list(base), {name: bad}


def _problem(qualname, fn, *args, **kwargs):
    """None when `fn(*args, **kwargs)` returns or raises a proper funcgrad error, else a
    description of what it raised."""
    short = qualname.split(".")[-1]
    try:
        with np.printoptions():  # fnp.set_printoptions changes NumPy's: restored after
            fn(*args, **kwargs)
    except errors.FuncgradInternalError as e:
        return f"FuncgradInternalError: {str(e)[:200]}"
    except errors.FuncgradError as e:
        return None if short in str(e) else f"message does not name {short}: {str(e)[:200]}"
    except Exception as e:  # noqa: BLE001  (what the test is looking for)
        return f"raw {type(e).__name__}: {str(e)[:200]}"
    return None


@pytest.mark.parametrize("qualname, fn", FUNCTIONS, ids=[q for q, _ in FUNCTIONS])
def test_bad_arguments_give_funcgrad_errors_naming_the_function(qualname, fn, tmp_path,
                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)  # fnp.save("str", ...) writes a file: not in the checkout
    problems = []
    for label, args, kwargs in _calls(fn):
        args = [_value(a) for a in args]
        kwargs = {k: _value(v) for k, v in kwargs.items()}
        p = _problem(qualname, fn, *args, **kwargs)
        if p:
            problems.append(f"{qualname}({label}): {p}")
    assert not problems, "\n".join(problems)


def _traced(fn, rest, kwargs):
    return fg.make_jaxpr(lambda x: fn(x, *rest, **kwargs))(_arr())


LAX_TRACED = [(q, f) for q, f in FUNCTIONS
              if q.startswith("lax.") and next(iter(inspect.signature(f).parameters), None)
              in ("x", "operand", "lhs", "a")]


@pytest.mark.parametrize("qualname, fn", LAX_TRACED, ids=[q for q, _ in LAX_TRACED])
def test_bad_arguments_inside_a_trace(qualname, fn):
    # The first (array) argument is traced; the bad values reach the trace's operand lifting.
    problems = []
    for label, args, kwargs in _calls(fn):
        if not args or label.startswith(next(iter(inspect.signature(fn).parameters)) + "="):
            continue
        rest = [_value(a) for a in args[1:]]
        kwargs = {k: _value(v) for k, v in kwargs.items()}
        p = _problem(qualname, _traced, fn, rest, kwargs)
        if p:
            problems.append(f"{qualname}({label}) traced: {p}")
    assert not problems, "\n".join(problems)


def test_the_fuzz_covers_the_public_api():
    assert len(FUNCTIONS) > 350
    assert sum(1 for _, f in FUNCTIONS for _ in _calls(f)) > 15000
    assert {"lax.reduce_sum", "lax.cond", "numpy.expand_dims", "numpy.roll"} <= {
        q for q, _ in FUNCTIONS}


# --- the findings of the review, one by one --------------------------------------------------

def _raises(cls, *fragments):
    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.ctx.__exit__(*exc)
            msg = str(self.info.value)
            for f in fragments + ("test_api_robustness.py",):
                assert f in msg, f"{f!r} not in message:\n{msg}"
            return suppressed
    return _Check()


def test_ragged_lists_name_the_operation():
    with _raises(errors.FuncgradTypeError, "add", "[[1, 2], [3]]"):
        lax.add([[1, 2], [3]], 1.0)
    with _raises(errors.FuncgradTypeError, "sum", "[[1, 2], [3]]"):
        fnp.sum([[1, 2], [3]])
    with _raises(errors.FuncgradTypeError, "array"):
        fnp.asarray([[1, 2], [3]])
    with _raises(errors.FuncgradTypeError, "mul", "str"):
        fg.jit(lambda x: lax.mul(x, "str"))(1.0)


def test_axis_arguments_must_be_ints():
    x = _arr()
    with _raises(errors.FuncgradTypeError, "expand_dims", "axis must be an int", "None"):
        fnp.expand_dims(x, axis=None)
    with _raises(errors.FuncgradTypeError, "roll", "axis must be an int", "1.5"):
        fnp.roll(x, 1, axis=1.5)
    with _raises(errors.FuncgradTypeError, "reduce_sum", "axes must be a sequence of ints",
                 "None"):
        lax.reduce_sum(x, axes=None)
    with _raises(errors.FuncgradTypeError, "transpose", "must be an int", "1.0"):
        lax.transpose(x, (1.0, 0))  # JAX rejects float axes too (int() would truncate)
    # funcgrad.numpy keeps NumPy's meaning of axis=None where it exists
    assert float(fnp.sum(x, axis=None)) == 6.0
    assert fnp.roll(fnp.arange(3), 1, axis=None).tolist() == [2, 0, 1]


def test_huge_ints_and_sizes():
    with _raises(errors.FuncgradOverflowError, "neg", str(2**70)):
        lax.neg(2**70)
    with _raises(errors.FuncgradMemoryError, "out of memory"):
        fnp.zeros(2**70)
    with _raises(errors.FuncgradValueError, "scan", "length"):
        lax.scan(lambda c, x: (c, x), 0.0, length=2**70)
    with _raises(errors.FuncgradValueError, "polygamma"):
        lax.polygamma(2**70, _arr())


def test_failing_repr_of_an_argument_does_not_escape():
    with _raises(errors.FuncgradTypeError, "convert_element_type", "BadRepr"):
        lax.convert_element_type(_arr(), BadRepr())
    with _raises(errors.FuncgradTypeError, "sum", "BadRepr"):
        fnp.sum(_arr(), axis=BadRepr())


def test_errors_from_user_code_pass_through_the_boundary_unchanged():
    class Mine(ValueError):
        pass

    def body(c):
        raise Mine("from the loop body")
    with pytest.raises(Mine, match="from the loop body"):
        lax.while_loop(lambda c: c < 1.0, body, 0.0)
    with pytest.raises(ZeroDivisionError):
        lax.cond(True, lambda: 1 / 0, lambda: 0.0)


def test_the_boundary_keeps_functions_picklable_and_introspectable():
    import pickle
    for f in (fnp.sum, lax.add, lax.and_, fnp.where):
        assert pickle.loads(pickle.dumps(f)) is f
    assert list(inspect.signature(fnp.sum).parameters)[:2] == ["a", "axis"]
    assert fnp.sum.__doc__ and fnp.sum.__doc__ == inspect.unwrap(fnp.sum).__doc__
