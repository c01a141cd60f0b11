"""The CUDA renderer's tables: the shared C-like table (`funcgrad.backends.cstyle`) with the
few expressions CUDA prints differently, and CUDA's vector types.

`TYPES[dtype]` is `(storage type, compute type)`; float16 is stored as `fg_half` and
computed in float32. `expr(instr, args, arg_dtypes)` returns the C expression of a kernel
instruction whose operands are the (already typed) expressions `args`, or raises
`Unsupported`. Expressions work unchanged under nvcc/NVRTC and under the CPU emulation
header (`emulate.py`), which defines the few CUDA-only functions they use. `UNFUSED` names
the fusible primitives CUDA prints no expression for, and why: a kernel holding one runs
its equations as library calls.
"""

import collections

from funcgrad import lax
from funcgrad.backends import cstyle
from funcgrad.backends.cstyle import (  # noqa: F401  (CUDA's vocabulary is C's)
    TYPES,
    Unsupported,
    combine,
    ctype,
    identity,
    literal,
    storage,
)

VEC_TYPES = {"float32": "float4", "int32": "int4", "uint32": "uint4", "bool": "uchar4",
             "uint8": "uchar4", "int8": "char4"}


def _popcount(a, d, p):
    t = d[0]
    fn = "__popcll" if cstyle.bits(t) == 64 else "__popc"
    return f"(({ctype(t)}){fn}(({cstyle.unsigned_of(t)}){a[0]}))"


# Where CUDA differs from C: intrinsics and CUDA's math library.
OVERRIDES = {lax.population_count_p: _popcount, lax.rsqrt_p: cstyle.math("rsqrt"),
             lax.erf_inv_p: cstyle.math("erfinv")}
EXPR = collections.ChainMap(OVERRIDES, cstyle.CODE_FOR_OP)

_COMPLEX = "complex numbers have no CUDA kernel type"
UNFUSED = {lax.real_p: _COMPLEX, lax.imag_p: _COMPLEX, lax.conj_p: _COMPLEX}


def expr(instr, args, arg_dtypes):
    """The C expression of `instr` (a fusion `Instr`) over operand expressions `args`."""
    return cstyle.expr(EXPR, instr, args, arg_dtypes)
