"""The CUDA renderer's tables: C types per dtype and one C expression per primitive.

`TYPES[dtype]` is `(storage type, compute type)`; float16 is stored as `fg_half` and
computed in float32. `expr(instr, args, arg_dtypes)` returns the C expression of a kernel
instruction whose operands are the (already typed) expressions `args`, or raises
`Unsupported`. Expressions work unchanged under nvcc/NVRTC and under the CPU emulation
header (`emulate.py`), which defines the few CUDA-only functions they use.
Integer arithmetic wraps like numpy's (done in the unsigned type: signed overflow is
undefined in C); division by zero gives 0 as numpy does; shifts past the bit width follow
XLA. Float-to-integer casts saturate and map NaN to 0 (XLA's rule), as the numpy backend
and eager lax do.
"""

import numpy as np

TYPES = {
    "bool": ("bool", "bool"),
    "int8": ("signed char", "signed char"), "uint8": ("unsigned char", "unsigned char"),
    "int16": ("short", "short"), "uint16": ("unsigned short", "unsigned short"),
    "int32": ("int", "int"), "uint32": ("unsigned int", "unsigned int"),
    "int64": ("long long", "long long"), "uint64": ("unsigned long long", "unsigned long long"),
    "float16": ("fg_half", "float"), "float32": ("float", "float"), "float64": ("double", "double"),
}
VEC_TYPES = {"float32": "float4", "int32": "int4", "uint32": "uint4", "bool": "uchar4",
             "uint8": "uchar4", "int8": "char4"}
_UNSIGNED = {"int8": "unsigned char", "int16": "unsigned short", "int32": "unsigned int",
             "int64": "unsigned long long"}


class Unsupported(Exception):
    """A kernel the CUDA renderer cannot print (e.g. complex numbers); the program runs its
    equations as library calls instead."""


def ctype(dtype):
    try:
        return TYPES[dtype][1]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no CUDA kernel type") from None


def storage(dtype):
    try:
        return TYPES[dtype][0]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no CUDA kernel type") from None


def literal(value, dtype):
    """C source of a typed scalar constant."""
    dt = np.dtype(dtype)
    v = np.asarray(value, dt).item() if dt.name != "float16" else float(np.float16(value))
    if dt.kind == "b":
        return "true" if v else "false"
    if dt.kind in "iu":
        if dt.itemsize == 8:
            return f"{v}ull" if dt.kind == "u" else (
                f"(-{-(v + 1)}ll - 1)" if v < 0 else f"{v}ll")
        text = f"{v}u" if dt.kind == "u" else (f"(-{-(v + 1)} - 1)" if v < 0 else str(v))
        return f"(({ctype(dt.name)}){text})" if dt.itemsize < 4 else text
    single = ctype(dt.name) == "float"
    if v != v:
        return "fg_nanf()" if single else "fg_nan()"
    if v in (float("inf"), float("-inf")):
        inf = "fg_inff()" if single else "fg_inf()"
        return inf if v > 0 else f"(-{inf})"
    text = str(np.float32(v)) if single else repr(float(v))
    if "." not in text and "e" not in text and "inf" not in text:
        text += ".0"
    return text + ("f" if single else "")


def _math(name):
    return lambda a, d, p: f"{name}{'f' if ctype(d[0]) == 'float' else ''}({', '.join(a)})"


def _kind(d):
    return np.dtype(d).kind


def _wrapping(op):
    """`a op b`, in the unsigned type for signed integers (wraps like numpy)."""
    def rule(a, d, p):
        t = d[0]
        if _kind(t) == "i":
            u = _UNSIGNED[t]
            return f"(({ctype(t)})(({u}){a[0]} {op} ({u}){a[1]}))"
        if _kind(t) == "b":
            return f"({a[0]} {'||' if op == '+' else '&&' if op == '*' else '!='} {a[1]})"
        if _kind(t) == "u" and np.dtype(t).itemsize < 4:
            return f"(({ctype(t)})({a[0]} {op} {a[1]}))"
        return f"({a[0]} {op} {a[1]})"
    return rule


def _div(a, d, p):
    t = d[0]
    if _kind(t) == "f":
        return f"({a[0]} / {a[1]})"
    if _kind(t) == "u":
        return f"(({ctype(t)})({a[1]} == 0 ? 0 : {a[0]} / {a[1]}))"
    u = _UNSIGNED[t]
    return (f"(({ctype(t)})({a[1]} == 0 ? 0 : {a[1]} == -1 ? ({ctype(t)})(-({u}){a[0]}) "
            f": {a[0]} / {a[1]}))")


def _rem(a, d, p):
    t = d[0]
    if _kind(t) == "f":
        return _math("fmod")(a, d, p)
    bad = f"{a[1]} == 0" + (f" || {a[1]} == -1" if _kind(t) == "i" else "")
    return f"(({ctype(t)})({bad} ? 0 : {a[0]} % {a[1]}))"


def _neg(a, d, p):
    t = d[0]
    if _kind(t) == "i":
        return f"(({ctype(t)})(-({_UNSIGNED[t]}){a[0]}))"
    return f"(({ctype(t)})(-{a[0]}))"


def _abs(a, d, p):
    t = d[0]
    if _kind(t) == "f":
        return _math("fabs")(a, d, p)
    if _kind(t) == "i":
        u = _UNSIGNED[t]
        return f"(({ctype(t)})({a[0]} < 0 ? -({u}){a[0]} : ({u}){a[0]}))"
    return a[0]


def _sign(a, d, p):
    t, x = d[0], a[0]
    if _kind(t) == "f":
        return f"({x} != {x} ? {x} : ({ctype(t)})(({x} > 0) - ({x} < 0)))"
    if _kind(t) == "u":
        return f"(({ctype(t)})({x} > 0))"
    return f"(({ctype(t)})(({x} > 0) - ({x} < 0)))"


def _minmax(fn, logical):
    def rule(a, d, p):
        if _kind(d[0]) == "b":
            return f"({a[0]} {logical} {a[1]})"
        return f"{fn}({a[0]}, {a[1]})"
    return rule


def _bitwise(op, logical):
    def rule(a, d, p):
        if _kind(d[0]) == "b":
            return f"({a[0]} {logical} {a[1]})"
        return f"(({ctype(d[0])})({a[0]} {op} {a[1]}))"
    return rule


def _not(a, d, p):
    return f"(!{a[0]})" if _kind(d[0]) == "b" else f"(({ctype(d[0])})(~{a[0]}))"


def _bits(t):
    return np.dtype(t).itemsize * 8


def _unsigned_of(t):
    return _UNSIGNED.get(t, ctype(t))


def _shift_left(a, d, p):
    t, u = d[0], _unsigned_of(d[0])
    return f"(({u}){a[1]} < {_bits(t)}u ? ({ctype(t)})(({u}){a[0]} << ({u}){a[1]}) : ({ctype(t)})0)"


def _shift_right_logical(a, d, p):
    t, u = d[0], _unsigned_of(d[0])
    return f"(({u}){a[1]} < {_bits(t)}u ? ({ctype(t)})(({u}){a[0]} >> ({u}){a[1]}) : ({ctype(t)})0)"


def _shift_right_arithmetic(a, d, p):
    t, u = d[0], _unsigned_of(d[0])
    s = TYPES[t.replace("uint", "int")][1] if _kind(t) == "u" else ctype(t)
    return (f"(({ctype(t)})(({s}){a[0]} >> (({u}){a[1]} < {_bits(t)}u ? (int){a[1]} "
            f": {_bits(t) - 1})))")


def _popcount(a, d, p):
    t = d[0]
    fn = "__popcll" if _bits(t) == 64 else "__popc"
    return f"(({ctype(t)}){fn}(({_unsigned_of(t)}){a[0]}))"


def _clz(a, d, p):
    t = d[0]
    if _bits(t) == 64:
        return f"(({ctype(t)})__clzll((long long){a[0]}))"
    pad = 32 - _bits(t)
    return f"(({ctype(t)})(__clz((int)({_unsigned_of(t)}){a[0]}) - {pad}))"


def _compare(op):
    return lambda a, d, p: f"({a[0]} {op} {a[1]})"


def _select_n(a, d, p):
    which, cases = a[0], a[1:]
    if len(cases) == 1:
        return cases[0]
    if _kind(d[0]) == "b":
        return f"({which} ? {cases[1]} : {cases[0]})"
    text = cases[-1]
    for i in reversed(range(len(cases) - 1)):
        text = f"({which} == {i} ? {cases[i]} : {text})"
    return text


def _clamp(a, d, p):
    return f"fg_min(fg_max({a[1]}, {a[0]}), {a[2]})"


def _integer_pow(a, d, p):
    y, x, t = p["y"], a[0], d[0]
    if y == 0:
        return literal(1, t)
    mul = _wrapping("*")
    result, base, e = None, x, abs(y)
    while e:
        if e & 1:
            result = base if result is None else mul([result, base], d, p)
        e >>= 1
        if e:
            base = mul([base, base], d, p)
    if y < 0:
        return f"({literal(1, t)} / {result})"
    return result


def _round(a, d, p):
    return _math("rint" if int(p.get("rounding_method", 0)) == 1 else "round")(a, d, p)


def _logistic(a, d, p):
    one = literal(1, d[0])
    return f"({one} / ({one} + {_math('exp')(['(-' + a[0] + ')'], d, p)}))"


def _convert(a, d, p, dst):
    if dst == "float16":
        return f"fg_round_half({a[0]})"
    if dst == "bool":
        return f"({a[0]} != 0)"
    if _kind(d[0]) == "f" and _kind(dst) in "iu":
        return _float_to_int(a[0], d[0], dst)
    return f"(({ctype(dst)}){a[0]})"


def _float_to_int(x, src, dst):
    # XLA's rule (as lax.elementwise.float_to_int): toward zero, saturating, NaN -> 0. An
    # out-of-range float-to-int cast is undefined in C, so the bounds are tested first against
    # exact powers of two (hex float literals): x >= max + 1 gives max, x <= min gives min.
    info, t = np.iinfo(dst), ctype(dst)
    suffix = "f" if ctype(src) == "float" else ""
    bits = np.dtype(dst).itemsize * 8 - (info.min < 0)
    top = f"0x1p{bits}{suffix}"
    low = f"(-0x1p{bits}{suffix})" if info.min < 0 else f"0.0{suffix}"
    return (f"({x} != {x} ? ({t})0 : {x} >= {top} ? ({t}){literal(info.max, dst)} : "
            f"{x} <= {low} ? ({t}){literal(info.min, dst)} : ({t}){x})")


def _is_finite(a, d, p):
    return f"(bool)isfinite({a[0]})"


def _square(a, d, p):
    return _wrapping("*")([a[0], a[0]], d, p)


def _rsqrt(a, d, p):
    return _math("rsqrt")(a, d, p)


def _digamma(a, d, p):
    return _math("fg_digamma")(a, d, p)


EXPR = {
    "add": _wrapping("+"), "add_any": _wrapping("+"), "sub": _wrapping("-"),
    "mul": _wrapping("*"), "div": _div, "rem": _rem, "pow": _math("pow"),
    "max": _minmax("fg_max", "||"), "min": _minmax("fg_min", "&&"), "atan2": _math("atan2"),
    "nextafter": _math("nextafter"), "neg": _neg, "sign": _sign, "floor": _math("floor"),
    "ceil": _math("ceil"), "round": _round, "is_finite": _is_finite, "abs": _abs,
    "square": _square, "integer_pow": _integer_pow, "logistic": _logistic, "rsqrt": _rsqrt,
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="), "and": _bitwise("&", "&&"),
    "or": _bitwise("|", "||"), "xor": _bitwise("^", "!="), "not": _not,
    "shift_left": _shift_left, "shift_right_logical": _shift_right_logical,
    "shift_right_arithmetic": _shift_right_arithmetic, "population_count": _popcount,
    "clz": _clz, "select_n": _select_n, "clamp": _clamp, "digamma": _digamma,
}
EXPR.update({name: _math(name) for name in (
    "exp exp2 log log1p expm1 tanh sin cos tan asin acos atan sinh cosh asinh acosh atanh "
    "sqrt cbrt erf erfc lgamma").split()})
EXPR["erf_inv"] = _math("erfinv")

_FLOAT_ONLY = set("""pow atan2 nextafter floor ceil round is_finite exp exp2 log log1p expm1 tanh
    sin cos tan asin acos atan sinh cosh asinh acosh atanh sqrt cbrt erf erfc lgamma erf_inv
    logistic rsqrt digamma""".split())
_NO_BOOL = {"div", "rem", "neg", "sign", "abs", "integer_pow", "shift_left",
            "shift_right_logical", "shift_right_arithmetic", "population_count", "clz", "sub"}


def expr(instr, args, arg_dtypes):
    """The C expression of `instr` (a fusion `Instr`) over operand expressions `args`."""
    if instr.op == "convert_element_type":
        return _convert(args, arg_dtypes, instr.param_dict, instr.dtype)
    rule = EXPR.get(instr.op)
    if rule is None:
        raise Unsupported(f"no CUDA expression for primitive {instr.op}")
    dts = list(arg_dtypes[1:]) if instr.op == "select_n" else list(arg_dtypes)
    for dt in set(arg_dtypes) | {instr.dtype}:
        ctype(dt)
    kind = _kind(dts[0]) if dts else "f"
    if instr.op in _FLOAT_ONLY and kind != "f":
        raise Unsupported(f"{instr.op} on {dts[0]} has no CUDA expression")
    if instr.op in _NO_BOOL and kind == "b":
        raise Unsupported(f"{instr.op} on bool has no CUDA expression")
    if instr.op == "select_n":
        return rule(args, [arg_dtypes[0]] + dts, instr.param_dict)
    return rule(args, dts, instr.param_dict)


# --- reductions --------------------------------------------------------------------------------

def combine(op, acc, value, acc_dtype):
    """C expression combining accumulator `acc` with `value` for reduction `op`."""
    if op == "sum":
        if _kind(acc_dtype) == "i":
            u = _UNSIGNED[acc_dtype]
            return f"(({ctype(acc_dtype)})(({u}){acc} + ({u}){value}))"
        return f"({acc} + {value})"
    return f"{'fg_max' if op == 'max' else 'fg_min'}({acc}, {value})"


def identity(op, dtype, acc_dtype):
    """The identity of reduction `op` over values of `dtype`, as a literal of `acc_dtype`."""
    dt = np.dtype(dtype)
    if op == "sum":
        return literal(0, acc_dtype)
    if dt.kind == "f":
        return literal(-np.inf if op == "max" else np.inf, acc_dtype)
    if dt.kind == "b":
        return literal(0 if op == "max" else 1, acc_dtype)
    info = np.iinfo(dt)
    return literal(info.min if op == "max" else info.max, acc_dtype)
