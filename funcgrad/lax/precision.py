"""`lax.Precision`: the precision argument of dot_general, dot, matmul, einsum and conv.

As in JAX, `precision=` takes None, a `Precision` (DEFAULT, HIGH, HIGHEST), one of the strings
JAX accepts ('default', 'high', 'highest', 'bfloat16', 'tensorfloat32', 'float32'), or a pair
of these (one per operand). funcgrad's backends always compute in the operands' full precision,
so the value only has to be valid; `canonicalize_precision` checks it. JAX's algorithm
choices (`DotAlgorithm`, `DotAlgorithmPreset`) are accepted too, and mean the same (full
precision). Also here: `Tolerance` and `AccuracyMode` (the `accuracy=` of transcendental
functions) and the type aliases `PrecisionLike` and `DotDimensionNumbers`. Imports errors
only.
"""

import dataclasses
import enum
import typing
from collections.abc import Sequence

from funcgrad import errors

# canonicalize_precision serves the lax wrappers (not in lax.*)
__all__ = ["AccuracyMode", "DotAlgorithm", "DotAlgorithmPreset", "DotDimensionNumbers",
           "Precision", "PrecisionLike", "Tolerance"]

_ALIASES = {"bfloat16": "DEFAULT", "tensorfloat32": "HIGH", "float32": "HIGHEST"}


class Precision(enum.Enum):
    """Precision of a matrix product or convolution (JAX's names and aliases).

    Example:
        >>> Precision("highest") is Precision.HIGHEST is Precision("float32")
        True
    """

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            name = _ALIASES.get(value.lower(), value.upper())
            if name in cls.__members__:
                return cls.__members__[name]
        return None

    def __str__(self):
        return self.name


def canonicalize_precision(precision, op="dot_general"):
    """None, a `Precision`, or a pair of them, from what a user may pass as `precision=`.

    Raises:
        FuncgradValueError: an unknown string; FuncgradTypeError: any other value.

    Example:
        >>> canonicalize_precision(("high", Precision.HIGHEST))
        (<Precision.HIGH: 1>, <Precision.HIGHEST: 2>)
    """
    if precision is None or isinstance(precision, Precision):
        return precision
    if isinstance(precision, str):
        try:
            return Precision(precision)
        except ValueError:
            raise errors.op_error(op, f"unknown precision {errors.short_repr(precision)}",
                                  cls=errors.FuncgradValueError,
                                  hint="use lax.Precision.DEFAULT/HIGH/HIGHEST or one of "
                                       f"{sorted(['default', 'high', 'highest', *_ALIASES])}"
                                  ) from None
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        return precision  # an algorithm: funcgrad computes in full precision anyway
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        return tuple(canonicalize_precision(p, op) for p in precision)
    if isinstance(precision, enum.Enum):  # another library's enum (e.g. jax.lax.Precision)
        return canonicalize_precision(precision.name, op)
    raise errors.op_error(op, f"precision must be None, a lax.Precision, a string such as "
                              f"'highest' or a pair of them, got {type(precision).__name__} "
                              f"{errors.short_repr(precision)}")


class DotAlgorithm(typing.NamedTuple):
    """JAX's description of a dot algorithm (storage and accumulation types, component
    counts); funcgrad accepts it as `precision=` and computes in full precision.

    Example:
        >>> DotAlgorithm("float32", "float32", "float32").lhs_component_count
        1
    """

    lhs_precision_type: object
    rhs_precision_type: object
    accumulation_type: object
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """JAX's named dot algorithms (accepted as `precision=`; funcgrad computes in full
    precision whichever is named)."""

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()


class AccuracyMode(enum.Enum):
    """The `accuracy=` of transcendental lax functions (JAX picks an implementation with it
    on TPUs only; everywhere else, funcgrad included, the one implementation runs)."""

    HIGHEST = 1
    DEFAULT = 2


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """The error a transcendental function's `accuracy=` allows (at least one bound set).

    Example:
        >>> Tolerance(atol=1e-6).rtol
        0.0
    """

    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0

    def __post_init__(self):
        if not (self.atol or self.rtol or self.ulps):
            raise errors.op_error("Tolerance", "at least one of atol, rtol or ulps must be "
                                  "set", cls=errors.FuncgradValueError)


PrecisionLike = (None | str | Precision | tuple[str, str] | tuple[Precision, Precision]
                 | DotAlgorithm | DotAlgorithmPreset)
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]
