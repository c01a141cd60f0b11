"""funcgrad.numpy's dtype policy is JAX's: float32/int32 defaults, weakly typed Python
scalars, int / int -> float, mean of ints -> float, sum of bools -> int32, float64 input
canonicalized unless x64, and 64-bit defaults with `enable_x64`.
"""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp

F32, I32, BOOL = np.dtype("float32"), np.dtype("int32"), np.dtype("bool")


def test_defaults_and_canonicalization():
    assert fnp.zeros(3).dtype == F32
    assert fnp.arange(3).dtype == I32
    assert fnp.arange(3.0).dtype == F32
    assert fnp.asarray(np.ones(3)).dtype == F32  # float64 -> float32
    assert fnp.asarray(np.ones(3, np.int64)).dtype == I32
    assert fnp.array([1.5, 2]).dtype == F32
    assert fnp.ones(2, dtype=np.float64).dtype == F32
    assert fnp.linspace(0, 1, 3).dtype == F32
    assert fnp.eye(2).dtype == F32


def test_weak_python_scalars_keep_array_dtype():
    x16 = fnp.ones(3, fnp.float16)
    assert (x16 * 2.0).dtype == np.float16
    assert (2 + x16).dtype == np.float16
    x = fnp.ones(3)
    assert (x * 2.0).dtype == F32 and not (x * 2.0).weak_type
    i8 = fnp.ones(3, fnp.int8)
    assert (i8 + 1).dtype == np.int8
    assert (1 - fnp.arange(3)).dtype == I32 and not (fnp.arange(3) * 2).weak_type
    assert (i8 * 2.5).dtype == F32  # an int array meets a weak float: the default float
    assert (fnp.arange(3) + 1.5).dtype == F32
    assert (fnp.arange(3) > 1.5).dtype == BOOL
    assert fnp.asarray(2.0).weak_type and fnp.asarray(2.0).dtype == F32
    assert (fnp.asarray(2.0) + fnp.asarray(3)).weak_type


def test_promotion_lattice_between_arrays():
    cases = [((fnp.int32, fnp.float32), F32), ((fnp.int8, fnp.uint8), np.int16),
             ((fnp.bool_, fnp.int32), I32), ((fnp.float16, fnp.int32), np.float16),
             ((fnp.uint32, fnp.int32), I32), ((fnp.bool_, fnp.float32), F32)]
    for (a, b), want in cases:
        x, y = fnp.ones(2, a), fnp.ones(2, b)
        assert (x + y).dtype == want, (a, b)
        assert fnp.result_type(x, y) == want
    assert fnp.promote_types(fnp.int8, fnp.uint8) == np.int16
    assert fnp.result_type(fnp.int32, 1.0) == F32
    assert fnp.result_type(fnp.float16, 1.0) == np.float16


def test_true_divide_means_and_sums():
    i = fnp.arange(1, 4)
    assert (i / i).dtype == F32
    assert fnp.true_divide(3, 2).dtype == F32
    assert (i // 2).dtype == I32
    assert fnp.mean(i).dtype == F32
    assert fnp.var(i).dtype == F32 and fnp.std(i).dtype == F32
    assert fnp.sum(fnp.array([True, True])).dtype == I32
    assert int(fnp.sum(fnp.array([True, True, False]))) == 2
    assert fnp.sum(fnp.ones(3, fnp.int8)).dtype == I32
    assert fnp.sum(fnp.ones(3, fnp.uint8)).dtype == np.uint32
    assert fnp.cumsum(fnp.array([True, False])).dtype == I32
    assert fnp.sqrt(fnp.arange(3)).dtype == F32
    assert fnp.sin(1).dtype == F32


def test_enable_x64_switches_defaults():
    fg.config.update("enable_x64", True)
    assert fnp.zeros(3).dtype == np.float64
    assert fnp.arange(3).dtype == np.int64
    assert fnp.asarray(np.ones(3)).dtype == np.float64
    assert (fnp.arange(3) / 2).dtype == np.float64
    assert fnp.mean(fnp.arange(3)).dtype == np.float64
    assert fnp.sum(fnp.array([True])).dtype == np.int64
    x32 = fnp.ones(2, fnp.float32)
    assert (x32 * 2.0).dtype == F32  # weak scalars still defer
    assert (x32 + fnp.ones(2)).dtype == np.float64
    assert fnp.asarray(2 ** 40).dtype == np.int64


def test_x64_off_rejects_overflowing_ints():
    with pytest.raises(OverflowError):
        fnp.asarray(2 ** 40)
    with pytest.raises(OverflowError, match="add: Python scalar 1000 does not fit in int8"):
        fnp.ones(2, fnp.int8) + 1000
    with pytest.raises(OverflowError, match="subtract"):
        fnp.subtract(2 ** 40, fnp.arange(2))


def test_scalar_types_and_dtype_helpers():
    assert np.dtype(fnp.float32) == F32
    assert fnp.float32 == np.float32 and fnp.float32 == F32
    assert fnp.ones(2).dtype == fnp.float32
    assert fnp.int32(3.9).dtype == I32 and int(fnp.int32(3.9)) == 3
    assert fnp.issubdtype(fnp.float32, fnp.floating)
    assert not fnp.issubdtype(fnp.int32, fnp.floating)
    assert fnp.isdtype(F32, "real floating")
    assert fnp.can_cast(fnp.int8, fnp.int32)
    assert fnp.finfo(fnp.float32).eps == np.finfo(np.float32).eps
    assert fnp.iinfo(fnp.int32).max == 2 ** 31 - 1
    assert isinstance(fnp.ones(2), fnp.ndarray)
    assert fnp.pi == np.pi and fnp.newaxis is None and np.isnan(fnp.nan)
    assert fnp.zeros(2, dtype="int32").dtype == I32
    assert fnp.zeros(2, dtype=fnp.bool_).dtype == BOOL


def test_astype_and_weak_type_of_results():
    x = fnp.asarray(2.5)
    assert x.weak_type
    assert not x.astype(fnp.float32).weak_type
    assert fnp.asarray(np.float32(2.5)).weak_type is False
    assert (fnp.arange(3.0) + 1).weak_type is False
    assert fnp.astype(fnp.arange(3), fnp.float64).dtype == F32
