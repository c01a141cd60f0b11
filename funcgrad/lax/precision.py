"""`lax.Precision`: the precision argument of dot_general, dot, matmul, einsum and conv.

As in JAX, `precision=` takes None, a `Precision` (DEFAULT, HIGH, HIGHEST), one of the strings
JAX accepts ('default', 'high', 'highest', 'bfloat16', 'tensorfloat32', 'float32'), or a pair
of these (one per operand). funcgrad's backends always compute in the operands' full precision,
so the value only has to be valid; `canonicalize_precision` checks it. Imports errors only.
"""

import enum

from funcgrad import errors

__all__ = ["Precision"]  # canonicalize_precision serves the lax wrappers (not in lax.*)

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
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        return tuple(canonicalize_precision(p, op) for p in precision)
    if isinstance(precision, enum.Enum):  # another library's enum (e.g. jax.lax.Precision)
        return canonicalize_precision(precision.name, op)
    raise errors.op_error(op, f"precision must be None, a lax.Precision, a string such as "
                              f"'highest' or a pair of them, got {type(precision).__name__} "
                              f"{errors.short_repr(precision)}")
