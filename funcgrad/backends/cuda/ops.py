"""The CUDA dialect: `CudaC`, the one C base (`funcgrad.backends.cstyle.CStyleLanguage`) with
what CUDA prints differently, CUDA's vector types and its prelude's own pieces.

`CudaC.code_for_op` is `ChainMap(OVERRIDES, cstyle.CODE_FOR_OP)`: CUDA differs from C only
where it has an intrinsic (population count) or a math function C99 lacks (`rsqrt`,
`erfinv`). Its helpers are `__device__ __forceinline__`; float16 conversions and special
values are hardware instructions and bit patterns (`prelude_pieces`), except under the CPU
emulation header (`emulate.py`, `FG_EMULATION`), which takes the base's portable ones.
Expressions work unchanged under nvcc/NVRTC and under the emulation header, which defines
the few CUDA-only functions they use. `CudaC.unfused` names the fusible primitives CUDA
prints no expression for, and why: a kernel holding one runs its equations as library
calls. Imports lax and cstyle only.
"""

import collections

from funcgrad import lax
from funcgrad.backends import cstyle
from funcgrad.backends.cstyle import TYPES, Unsupported, ctype, literal, storage  # noqa: F401

VEC_TYPES = {"float32": "float4", "int32": "int4", "uint32": "uint4", "bool": "uchar4",
             "uint8": "uchar4", "int8": "char4"}


def _popcount(a, d, p):
    t = d[0]
    fn = "__popcll" if cstyle.bits(t) == 64 else "__popc"
    return f"(({ctype(t)}){fn}(({cstyle.unsigned_of(t)}){a[0]}))"


# Where CUDA differs from C: intrinsics and CUDA's math library.
OVERRIDES = {lax.population_count_p: _popcount, lax.rsqrt_p: cstyle.math("rsqrt"),
             lax.erf_inv_p: cstyle.math("erfinv")}
_COMPLEX = "complex numbers have no CUDA kernel type"

# float16 conversions in one PTX instruction each (round to nearest even), special values
# as bit patterns: NVRTC needs no toolkit header for them.
_HALF = """struct fg_half { unsigned short x; };
__device__ __forceinline__ float fg_h2f(fg_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f; }
__device__ __forceinline__ fg_half fg_f2h(float f) { fg_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
__device__ __forceinline__ fg_half fg_d2h(double d) { fg_half h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.x) : "d"(d)); return h; }
"""  # noqa: E501
_SPECIAL = """__device__ __forceinline__ float fg_inff() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float fg_nanf() { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double fg_inf() { return __longlong_as_double(0x7ff0000000000000ll); }
__device__ __forceinline__ double fg_nan() { return __longlong_as_double(0x7fffffffffffffffll); }
"""  # noqa: E501
_MINMAX = """template <typename T> __device__ __forceinline__ T fg_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T fg_min(T a, T b) { return (a < b || a != a) ? a : b; }
"""  # noqa: E501


class CudaC(cstyle.CStyleLanguage):
    """CUDA C++ for NVRTC and nvcc (see the module doc); `renderer._Renderer` renders with
    it."""

    code_for_op = collections.ChainMap(OVERRIDES, cstyle.CStyleLanguage.code_for_op)
    unfused = {lax.real_p: _COMPLEX, lax.imag_p: _COMPLEX, lax.conj_p: _COMPLEX}
    qualifier = "__device__ __forceinline__"

    @classmethod
    def prelude_pieces(cls):
        """The prelude's pieces (`templates/prelude.cu.j2` arranges them): the hardware
        float16 conversions and special values (left out under the emulation header), the
        NaN-propagating `fg_max`/`fg_min` and the base's helpers."""
        return {"device_only": _HALF + _SPECIAL, "minmax": _MINMAX,
                "helpers": cls.helpers_source()}

    @classmethod
    def emulated_source(cls):
        """What the CPU emulation header defines in place of `device_only`: the base's
        portable float16 conversions and special values, as C++ `inline` functions."""
        return cstyle.half_source("inline") + cstyle.special_values_source("inline")
