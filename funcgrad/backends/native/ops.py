"""The native C dialect: `NativeC`, the one C base (`funcgrad.backends.cstyle.CStyleLanguage`)
with what plain C prints differently, and the C prelude every module starts with.

`NativeC.code_for_op` is `ChainMap(OVERRIDES, cstyle.CODE_FOR_OP)`: C differs from CUDA only
where CUDA has an intrinsic (population count) or a math function C99 lacks (`erfinv`, done
here by Newton steps on `erf`), and where the eager implementation computes in double
(`erf`, `erfc`, `lgamma`) or an inline function is faster (`exp`, `tanh`). `NativeC.unfused`
names what a C kernel cannot compute (complex numbers): a kernel holding one runs on the numpy
tier. Kernel values of bools are `int`s and arrays of bools `unsigned char`s (gcc 12
vectorizes neither `_Bool` loads nor loops mixing `_Bool` with floats). `PRELUDE` defines the
helpers the expressions use (the base's float16 conversions and helpers, NaN-propagating
`fg_max`/`fg_min` for every C type through `_Generic`). Imports lax and cstyle only.
"""

import collections
import math

import numpy as np

from funcgrad import lax
from funcgrad.backends import cstyle
from funcgrad.backends.cstyle import NARROW, Unsupported, ctype, literal, storage  # noqa: F401


def _popcount(a, d, p):
    t = d[0]
    return f"(({ctype(t)})__builtin_popcountll(({cstyle.unsigned_of(t)}){a[0]}))"


def _tanh(a, d, p):
    return f"fg_tanhf({a[0]})" if ctype(d[0]) == "float" else f"tanh({a[0]})"


def _via_double(name):
    """`name` in double precision, rounded: as the eager implementation (Python's math
    module in double) computes float32 erf, erfc and lgamma."""
    def rule(a, d, p):
        if ctype(d[0]) == "float":
            return f"((float){name}((double){a[0]}))"
        return f"{name}({a[0]})"
    return rule


def _exp(a, d, p):
    return f"fg_expf({a[0]})" if ctype(d[0]) == "float" else f"exp({a[0]})"


def _logistic(a, d, p):
    one = literal(1, d[0])
    return f"({one} / ({one} + {_exp([f'({cstyle.negated(a[0])})'], d, p)}))"


OVERRIDES = {lax.population_count_p: _popcount, lax.erf_inv_p: cstyle.math("fg_erfinv"),
             lax.exp_p: _exp, lax.logistic_p: _logistic,
             lax.tanh_p: _tanh, lax.erf_p: _via_double("erf"),
             lax.erfc_p: _via_double("erfc"), lax.lgamma_p: _via_double("lgamma")}
_COMPLEX = "complex numbers have no C kernel type in the native backend"


class NativeC(cstyle.CStyleLanguage):
    """Plain C99 for gcc and clang (see the module doc); `kernel.CKernel` renders with it."""

    code_for_op = collections.ChainMap(OVERRIDES, cstyle.CStyleLanguage.code_for_op)
    unfused = {lax.real_p: _COMPLEX, lax.imag_p: _COMPLEX, lax.conj_p: _COMPLEX}

    def value_type(self, dtype):
        # booleans as `int` 0/1: a loop mixing `_Bool` values with floats does not vectorize
        # with gcc 12 (a GP's kernel-matrix kernel, with its masks, ran scalar at 10 ns per
        # element)
        return "int" if dtype == "bool" else ctype(dtype)

    def pointee(self, dtype):
        # bools as `unsigned char` (a loop that loads `_Bool` does not vectorize with gcc 12:
        # a ReLU-backward mask ran at 2 GB/s)
        return "unsigned char" if dtype == "bool" else storage(dtype)


class EqnRoutine:
    """A C routine of one equation (`linalg.py`, `windows.py`, `along_axis.py`): its C
    function takes the equation's operands, then its results; `operands` is (dtype, size)
    per pointer, `n_in` the number of inputs, as `program._caller` checks them."""

    @property
    def operands(self):
        avals = [v.aval for v in self.eqn.invars] + [v.aval for v in self.eqn.outvars]
        return [(np.dtype(a.dtype), math.prod(a.shape)) for a in avals]

    @property
    def n_in(self):
        return len(self.eqn.invars)


_MINMAX_TYPES = [("bool", "b"), ("signed char", "i8"), ("unsigned char", "u8"),
                 ("short", "i16"), ("unsigned short", "u16"), ("int", "i32"),
                 ("unsigned int", "u32"), ("long long", "i64"), ("unsigned long long", "u64"),
                 ("float", "f32"), ("double", "f64")]


def _minmax():
    lines = []
    for t, s in _MINMAX_TYPES:
        lines.append(f"static inline {t} fg_max_{s}({t} a, {t} b) "
                     "{ return (a > b || a != a) ? a : b; }")
        lines.append(f"static inline {t} fg_min_{s}({t} a, {t} b) "
                     "{ return (a < b || a != a) ? a : b; }")
    for fn in ("max", "min"):
        cases = ", ".join(f"{t}: fg_{fn}_{s}" for t, s in _MINMAX_TYPES)
        lines.append(f"#define fg_{fn}(a, b) _Generic((a), {cases}, char: fg_{fn}_i8)(a, b)")
    return "\n".join(lines)


# The math functions glibc's libmvec has SIMD versions of (x86-64, glibc >= 2.35; 2.22 had
# the first five). Declared `simd` when the compiler probe links them (`-DFG_VECTOR_MATH`),
# loops calling them vectorize; libmvec's results are within 4 ulp (glibc's manual).
VECTOR_MATH = ("cos", "sin", "exp", "log", "pow", "acos", "acosh", "asin", "asinh", "atan",
               "atan2", "atanh", "cbrt", "cosh", "erf", "erfc", "exp2", "expm1", "log1p",
               "sinh", "tan", "tanh")
BINARY_MATH = ("pow", "atan2")


def vector_math_declarations(names=VECTOR_MATH):
    lines = []
    for n in names:
        for t, f in (("double", n), ("float", n + "f")):
            args = ", ".join([t] * (2 if n in BINARY_MATH else 1))
            lines.append(f'{t} {f}({args}) __attribute__((__simd__("notinbranch")));')
    return "\n".join(lines)


PRELUDE = r"""// funcgrad native C module
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
/* Asks for the cache line of element `i` of `p` (kernel.PREFETCH_BYTES ahead of a loop):
   in integers, as the address may lie past the array's end, where a prefetch cannot fault */
#if defined(__GNUC__) || defined(__clang__)
#define FG_PREFETCH(p, i) \
    __builtin_prefetch((const void *)((uintptr_t)(p) + (uintptr_t)(i) * sizeof(*(p))))
#else
#define FG_PREFETCH(p, i) ((void)0)
#endif
/* Before a call of another function of the module (the loops' and segments' kernels): gcc
   puts no vzeroupper before such a call, so a callee running libm's scalar SSE code (log1pf
   in erfinv) with the upper halves of the vector registers in use paid a transition
   penalty on every instruction (an ADVI loop 0.11 -> 0.42 ms). All vector registers are
   caller-saved, so nothing is live in them across the call. */
#if defined(__AVX__) && (defined(__GNUC__) || defined(__clang__))
#define FG_UPPER_CLEAN() __builtin_ia32_vzeroupper()
#else
#define FG_UPPER_CLEAN() ((void)0)
#endif
#ifdef FG_VECTOR_MATH
""" + vector_math_declarations() + r"""
#endif
""" + NativeC.half_source() + NativeC.special_values_source() + _minmax() + r"""
""" + NativeC.helpers_source().rstrip() + r"""
/* Pairwise summation of block sums (kernel.PAIRWISE_BLOCK): a binary counter, where the n-th
   block's sum adds the sums of the blocks it completes a power of two with, so each
   element passes through about log2(blocks) additions, as in numpy's pairwise sum. */
typedef struct { double s[64]; int top; long long n; } fg_pairwise;
static inline void fg_pairwise_add(fg_pairwise *p, double block) {
    for (long long c = ++p->n; !(c & 1); c >>= 1) block += p->s[--p->top];
    p->s[p->top++] = block;
}
static inline double fg_pairwise_total(const fg_pairwise *p) {
    double t = 0.0;
    for (int i = p->top - 1; i >= 0; --i) t += p->s[i];  /* the smallest sums first */
    return t;
}
/* e^x = e^r * 2^n: Cody-Waite reduction by ln 2 (r in [-ln2/2, ln2/2], `*n` the integer n
   as a float), Cephes' degree-6 polynomial; returns e^r. Inline, so loops calling it
   vectorize without libmvec's call and its special-case paths. */
static inline float fg_exp_reduced(float x, float *n) {
    *n = fmaf(x, 1.44269504088896341f, 12582912.0f) - 12582912.0f;
    const float r = fmaf(*n, -1.42860677e-6f, fmaf(*n, -0.693145752f, x));
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f); p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f); p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    return fmaf(p, r * r, r) + 1.0f;
}
static inline float fg_pow2i(int k) {  /* 2^k for k in [-126, 127] */
    const unsigned bits = (unsigned)(k + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return s;
}
/* e^x for x in [0, 20] only (fg_tanhf's argument; 15% of a gelu kernel against libmvec's). */
static inline float fg_expf_tanh(float x) {
    float n;
    const float e = fg_exp_reduced(x, &n);
    return e * fg_pow2i((int)n);
}
/* float exp in C (no call). libmvec's vector expf ran 5x slower on a causal softmax, half
   of whose logits are masked to -inf: lanes whose result underflows meet subnormal numbers
   (each a microcode assist on x86) or are redone by a scalar call. Here a lane below -104
   (whose exp rounds to +0) computes exp(-80) and is replaced by 0, so only lanes whose
   result is subnormal meet one. `fg_exp_reduced` on x clamped to 89 above (the result
   overflows to +inf), scaled by 2^n in two steps so that a subnormal result rounds once:
   within 1.01 ulp of the exact exp over every 61st float (tests/test_native_backend.py;
   numpy's own float32 exp: 2.4). Double exp stays libm's. */
static inline float fg_expf(float x) {
    float n;
    const int low = x < -104.0f, nan = x != x;  /* a NaN must not reach the int conversion */
    const float e = fg_exp_reduced(low | nan ? -80.0f : (x > 89.0f ? 89.0f : x), &n);
    const int k = (int)n, k1 = k / 2;  /* 2^k1 and 2^(k - k1) are normal floats */
    const float y = (e * fg_pow2i(k1)) * fg_pow2i(k - k1);
    return low ? 0.0f : (nan ? x : y);
}
/* float tanh, vectorized and inline: below 0.75 an odd polynomial (least squares in the
   relative error), above 1 - 2 / (e^2|x| + 1); within 1.1 ulp of the exact result over every
   float in [0, 11] (checked exhaustively; the test checks a sample), 1 above. */
static inline float fg_tanhf_inline(float x) {
    const float a = fabsf(x), z = x * x;
    float p = 0.0017751469276845455f;
    p = fmaf(p, z, -0.007716181222349405f); p = fmaf(p, z, 0.02148553915321827f);
    p = fmaf(p, z, -0.053901270031929016f); p = fmaf(p, z, 0.13332787156105042f);
    p = fmaf(p, z, -0.33333319425582886f);
    const float e = fg_expf_tanh(2.0f * (a < 10.0f ? a : 10.0f));
    const float t = a < 0.75f ? fmaf(x, z * p, x) : copysignf(1.0f - 2.0f / (e + 1.0f), x);
    return x != x || a < 0x1p-12f ? x : t;  /* tanh(x) rounds to x below 2^-12 (and -0) */
}
/* The float tanh kernels call. With 512-bit vectors libmvec's 16-lane tanhf (a table and a
   short polynomial, no division; within 1.5 ulp) takes 0.6x the time of fg_tanhf_inline, so a
   gelu loop on one core goes from 32% to 52% of copy bandwidth; with 256-bit vectors it takes
   1.1-1.3x, so there the inline one stays (`benchmarks/bench_tanh_cost.py`). */
#if defined(FG_VECTOR_MATH) && defined(__AVX512F__) && !defined(__clang__)
static inline float fg_tanhf(float x) { return tanhf(x); }
#else
static inline float fg_tanhf(float x) { return fg_tanhf_inline(x); }
#endif
static inline double fg_erfinv(double y) {
    if (!(y > -1.0 && y < 1.0)) return y == 1.0 ? INFINITY : y == -1.0 ? -INFINITY : NAN;
    const double w = -log((1.0 - y) * (1.0 + y));
    double x;  /* Giles' single-precision approximation, then Newton steps on erf */
    if (w < 5.0) {
        const double v = w - 2.5;
        x = 2.81022636e-08; x = 3.43273939e-07 + x * v; x = -3.5233877e-06 + x * v;
        x = -4.39150654e-06 + x * v; x = 0.00021858087 + x * v; x = -0.00125372503 + x * v;
        x = -0.00417768164 + x * v; x = 0.246640727 + x * v; x = 1.50140941 + x * v;
    } else {
        const double v = sqrt(w) - 3.0;
        x = -0.000200214257; x = 0.000100950558 + x * v; x = 0.00134934322 + x * v;
        x = -0.00367342844 + x * v; x = 0.00573950773 + x * v; x = -0.0076224613 + x * v;
        x = 0.00943887047 + x * v; x = 1.00167406 + x * v; x = 2.83297682 + x * v;
    }
    x *= y;
    for (int i = 0; i < 3; ++i) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}
/* float32: Giles' single-precision polynomial alone, operation for operation as the eager
   implementation (and XLA) computes it, so random.normal gives the same numbers. */
static inline float fg_erfinvf(float y) {
    const float w = -log1pf(-y * y), v = w - 2.5f, u = sqrtf(w) - 3.0f;
    float p = 2.81022636e-08f, q = -0.000200214257f;
    p = p * v + 3.43273939e-07f; p = p * v - 3.5233877e-06f; p = p * v - 4.39150654e-06f;
    p = p * v + 0.00021858087f; p = p * v - 0.00125372503f; p = p * v - 0.00417768164f;
    p = p * v + 0.246640727f; p = p * v + 1.50140941f;
    q = q * u + 0.000100950558f; q = q * u + 0.00134934322f; q = q * u - 0.00367342844f;
    q = q * u + 0.00573950773f; q = q * u - 0.0076224613f; q = q * u + 0.00943887047f;
    q = q * u + 1.00167406f; q = q * u + 2.83297682f;
    return fabsf(y) == 1.0f ? y * INFINITY : y * (w < 5.0f ? p : q);
}
"""
