"""The one C base of the backends that print C (native C, CUDA), after tinygrad's
`CStyleLanguage`: C types per dtype, scalar literals, one C expression per primitive (keyed by
the primitive object), the statements of a kernel's element (load, instruction, store,
reduction update) with the narrow-float policy, and the prelude's shared helpers.

`CODE_FOR_OP[prim](args, dtypes, params)` returns the C expression of a kernel instruction
whose operands are the (already typed) expressions `args` of dtype names `dtypes`. A
dialect's table is `collections.ChainMap(its overrides, CODE_FOR_OP)`: it lists only what
differs (CUDA: intrinsics), and sees expressions declared later from outside the package
(`def_expression`). `expr(table, instr, args, dtypes)` looks an instruction up (its op
names a fusible primitive, `Primitive.fusible_named`) or raises `Unsupported`.

`CStyleLanguage` holds the rules every dialect shares; a dialect subclasses it and overrides
only what differs (`native.ops.NativeC`, `cuda.ops.CudaC`), and each renderer subclasses its
dialect (`native.kernel.CKernel`, `cuda.renderer._Renderer`).

Expressions are C99 plus a few helpers every dialect's prelude defines: `fg_half`,
`fg_h2f`/`fg_f2h`/`fg_round_half` (float16 stored as 16 bits, computed in float32), `fg_bf16`,
`fg_bf2f`/`fg_f2bf`/`fg_round_bf16` (bfloat16 likewise, rounded as ml_dtypes rounds),
`fg_max`/`fg_min` (NaN-propagating), `fg_nan[f]`/`fg_inf[f]`, `fg_digamma[f]`. Integer
arithmetic wraps like numpy's (done in the unsigned type: signed overflow is undefined in
C); division by zero gives 0 as numpy does; shifts past the bit width follow XLA.
Float-to-integer casts saturate and map NaN to 0 (XLA's rule), as the numpy backend and
eager lax do. Imports the primitives (lax) and no compiler pass.
"""

from dataclasses import dataclass

import numpy as np

from funcgrad import dtypes, lax
from funcgrad.core import Primitive, ReduceOp

TYPES = {
    "bool": ("bool", "bool"),
    "int8": ("signed char", "signed char"), "uint8": ("unsigned char", "unsigned char"),
    "int16": ("short", "short"), "uint16": ("unsigned short", "unsigned short"),
    "int32": ("int", "int"), "uint32": ("unsigned int", "unsigned int"),
    "int64": ("long long", "long long"), "uint64": ("unsigned long long", "unsigned long long"),
    "float16": ("fg_half", "float"), "float32": ("float", "float"), "float64": ("double", "double"),
    "bfloat16": ("fg_bf16", "float"),
}
_UNSIGNED = {"int8": "unsigned char", "int16": "unsigned short", "int32": "unsigned int",
             "int64": "unsigned long long"}


class Unsupported(Exception):
    """A kernel a C-like renderer cannot print (e.g. complex numbers); the program runs its
    equations as library calls instead."""


def ctype(dtype):
    """The C type a value of `dtype` is computed in."""
    try:
        return TYPES[dtype][1]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no C kernel type") from None


def operands(instr, dtypes):
    """The C expressions and dtypes of a kernel instruction's arguments: `v_<name>` for a
    value (its dtype from `dtypes`), a typed literal for a constant."""
    args, dts = [], []
    for a in instr.args:
        if isinstance(a, str):
            args.append(f"v_{a}")
            dts.append(dtypes[a])
        else:
            args.append(literal(a.value, a.dtype))
            dts.append(a.dtype)
    return args, dts


def storage(dtype):
    """The C type an array of `dtype` is stored as."""
    try:
        return TYPES[dtype][0]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no C kernel type") from None


def literal(value, dtype):
    """C source of a typed scalar constant."""
    dt = np.dtype(dtype)
    v = np.asarray(value, dt).item() if dt.name != "float16" else float(np.float16(value))
    kind = dtypes.kind(dt)
    if kind == "b":
        return "true" if v else "false"
    if kind in "iu":
        if dt.itemsize == 8:
            return f"{v}ull" if kind == "u" else (
                f"(-{-(v + 1)}ll - 1)" if v < 0 else f"{v}ll")
        text = f"{v}u" if kind == "u" else (f"(-{-(v + 1)} - 1)" if v < 0 else str(v))
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


# --- rule makers ------------------------------------------------------------------------------

def math(name):
    """`name(args)`, or `namef(args)` in single precision (the C99 math functions)."""
    return lambda a, d, p: f"{name}{'f' if ctype(d[0]) == 'float' else ''}({', '.join(a)})"


def _kind(d):
    return dtypes.kind(np.dtype(d))


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


def _minmax(fn, logical):
    """`fn(a, b)`: numpy's maximum/minimum, NaN first, else on a tie (+0 and -0) its second
    operand for float32/float64 but its first for float16 (`fg_maxh`), as numpy's loops do."""
    def rule(a, d, p):
        if _kind(d[0]) == "b":
            return f"({a[0]} {logical} {a[1]})"
        return f"{fn}{'h' if d[0] == 'float16' else ''}({a[0]}, {a[1]})"
    return rule


def _bitwise(op, logical):
    def rule(a, d, p):
        if _kind(d[0]) == "b":
            return f"({a[0]} {logical} {a[1]})"
        return f"(({ctype(d[0])})({a[0]} {op} {a[1]}))"
    return rule


def _compare(op):
    return lambda a, d, p: f"({a[0]} {op} {a[1]})"


# --- rules ------------------------------------------------------------------------------------

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
        return math("fmod")(a, d, p)
    bad = f"{a[1]} == 0" + (f" || {a[1]} == -1" if _kind(t) == "i" else "")
    return f"(({ctype(t)})({bad} ? 0 : {a[0]} % {a[1]}))"


def negated(x):
    """`-x` as C source; `-(x)` when `x` itself starts with a minus (a negative literal:
    `--0.5f` would be a decrement)."""
    return f"-({x})" if x.startswith("-") else f"-{x}"


def _neg(a, d, p):
    t = d[0]
    if _kind(t) == "i":
        return f"(({ctype(t)})(-({_UNSIGNED[t]}){a[0]}))"
    return f"(({ctype(t)})({negated(a[0])}))"


def _abs(a, d, p):
    t = d[0]
    if _kind(t) == "f":
        return math("fabs")(a, d, p)
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


def _not(a, d, p):
    return f"(!{a[0]})" if _kind(d[0]) == "b" else f"(({ctype(d[0])})(~{a[0]}))"


def bits(t):
    return np.dtype(t).itemsize * 8


def unsigned_of(t):
    """The unsigned C type of integer dtype `t`."""
    return _UNSIGNED.get(t, ctype(t))


def _shift_left(a, d, p):
    t, u = d[0], unsigned_of(d[0])
    return f"(({u}){a[1]} < {bits(t)}u ? ({ctype(t)})(({u}){a[0]} << ({u}){a[1]}) : ({ctype(t)})0)"


def _shift_right_logical(a, d, p):
    t, u = d[0], unsigned_of(d[0])
    return f"(({u}){a[1]} < {bits(t)}u ? ({ctype(t)})(({u}){a[0]} >> ({u}){a[1]}) : ({ctype(t)})0)"


def _shift_right_arithmetic(a, d, p):
    t, u = d[0], unsigned_of(d[0])
    s = TYPES[t.replace("uint", "int")][1] if _kind(t) == "u" else ctype(t)
    return (f"(({ctype(t)})(({s}){a[0]} >> (({u}){a[1]} < {bits(t)}u ? (int){a[1]} "
            f": {bits(t) - 1})))")


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


def _clamp(a, d, p):  # min(max(x, lo), hi), numpy's order (lax.clamp's impl)
    inner = _minmax("fg_max", "||")([a[1], a[0]], d, p)
    return _minmax("fg_min", "&&")([inner, a[2]], d, p)


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
    return math("rint" if int(p.get("rounding_method", 0)) == 1 else "round")(a, d, p)


def _logistic(a, d, p):
    one = literal(1, d[0])
    return f"({one} / ({one} + {math('exp')([f'({negated(a[0])})'], d, p)}))"


def _convert(a, d, p):
    dst = p["new_dtype"]
    narrow = NARROW.get(dst)
    if narrow is not None:  # a double (or a 32/64-bit integer, exact in one) in one rounding,
        # as ml_dtypes converts: through float it would round twice
        if ctype(d[0]) == "double" or _kind(d[0]) in "iu" and bits(d[0]) >= 32:
            return f"{narrow.round}_d((double){a[0]})"
        return f"{narrow.round}({a[0]})"
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
    width = np.dtype(dst).itemsize * 8 - (info.min < 0)
    top = f"0x1p{width}{suffix}"
    low = f"(-0x1p{width}{suffix})" if info.min < 0 else f"0.0{suffix}"
    return (f"({x} != {x} ? ({t})0 : {x} >= {top} ? ({t}){literal(info.max, dst)} : "
            f"{x} <= {low} ? ({t}){literal(info.min, dst)} : ({t}){x})")


def _is_finite(a, d, p):
    return f"(bool)isfinite({a[0]})"


def _rsqrt(a, d, p):
    one = literal(1, d[0])
    return f"({one} / {math('sqrt')(a, d, p)})"


CODE_FOR_OP = {
    lax.add_p: _wrapping("+"), lax.add_any_p: _wrapping("+"), lax.sub_p: _wrapping("-"),
    lax.mul_p: _wrapping("*"), lax.div_p: _div, lax.rem_p: _rem,
    lax.max_p: _minmax("fg_max", "||"), lax.min_p: _minmax("fg_min", "&&"),
    lax.neg_p: _neg, lax.sign_p: _sign, lax.round_p: _round, lax.is_finite_p: _is_finite,
    lax.abs_p: _abs, lax.integer_pow_p: _integer_pow, lax.logistic_p: _logistic,
    lax.rsqrt_p: _rsqrt, lax.digamma_p: math("fg_digamma"),
    lax.eq_p: _compare("=="), lax.ne_p: _compare("!="), lax.lt_p: _compare("<"),
    lax.le_p: _compare("<="), lax.gt_p: _compare(">"), lax.ge_p: _compare(">="),
    lax.and_p: _bitwise("&", "&&"), lax.or_p: _bitwise("|", "||"),
    lax.xor_p: _bitwise("^", "!="), lax.not_p: _not,
    lax.shift_left_p: _shift_left, lax.shift_right_logical_p: _shift_right_logical,
    lax.shift_right_arithmetic_p: _shift_right_arithmetic,
    lax.select_n_p: _select_n, lax.clamp_p: _clamp, lax.convert_element_type_p: _convert,
}
# Primitives that are the C99 math function of their own name (`expf`, `atan2`, ...).
CODE_FOR_OP.update({p: math(p.name) for p in (
    lax.exp_p, lax.exp2_p, lax.log_p, lax.log1p_p, lax.expm1_p, lax.tanh_p, lax.sin_p,
    lax.cos_p, lax.tan_p, lax.asin_p, lax.acos_p, lax.atan_p, lax.sinh_p, lax.cosh_p,
    lax.asinh_p, lax.acosh_p, lax.atanh_p, lax.sqrt_p, lax.cbrt_p, lax.erf_p, lax.erfc_p,
    lax.lgamma_p, lax.pow_p, lax.atan2_p, lax.floor_p, lax.ceil_p)})


def _nextafter(a, d, p):
    if d[0] in NARROW:  # a step in float16 (bfloat16), not in the float it computes in
        return f"fg_nextafter_{'half' if d[0] == 'float16' else 'bf16'}({a[0]}, {a[1]})"
    return math("nextafter")(a, d, p)


CODE_FOR_OP[lax.nextafter_p] = _nextafter


def def_expression(prim, rule, table=CODE_FOR_OP):
    """Give the fusible elementwise primitive `prim` (one defined outside the package, say)
    the C expression `rule(args, dtypes, params)` in `table` (by default the shared one, so
    every C-like backend prints it)."""
    if prim.kind != "elementwise" or not prim.fusible:
        raise ValueError(f"{prim.name}: only a fusible elementwise primitive has a kernel "
                         f"expression (declared kind {prim.kind!r}, fusible={prim.fusible})")
    table[prim] = rule


def expr(table, instr, args, arg_dtypes):
    """The C expression of `instr` (a fusion `Instr`) over operand expressions `args` of
    dtype names `arg_dtypes`, from `table` (keyed by primitive)."""
    prim = Primitive.fusible_named(instr.op)
    rule = table.get(prim)
    if rule is None:
        raise Unsupported(f"no C expression for primitive {instr.op}")
    for dt in set(arg_dtypes) | {instr.dtype}:
        ctype(dt)
    kind = _kind(arg_dtypes[0]) if arg_dtypes else "f"
    if prim.dtype_kinds is not None and kind not in prim.dtype_kinds:
        raise Unsupported(f"{instr.op} on {arg_dtypes[0]} has no C expression")
    return rule(args, list(arg_dtypes), instr.param_dict)


# --- narrow floats ----------------------------------------------------------------------------

@dataclass(frozen=True)
class NarrowFloat:
    """A float stored in fewer bits than it is computed in: loaded into its compute type
    (`TYPES`), rounded back to its own precision after every operation (as numpy computes
    float16 ufuncs, and eager funcgrad bfloat16: in float32, each result rounded to the
    narrow type), and stored as bits. `round` has a variant `<round>_d` from double, in one
    rounding."""

    load: str  # C function: storage -> compute type
    store: str  # C function: compute type -> storage (round to nearest even)
    round: str  # C function: compute type -> compute type, rounded to this format


NARROW = {"float16": NarrowFloat("fg_h2f", "fg_f2h", "fg_round_half"),
          "bfloat16": NarrowFloat("fg_bf2f", "fg_f2bf", "fg_round_bf16")}


# --- the base of every C dialect --------------------------------------------------------------

class CStyleLanguage:
    """The rules every C dialect shares; a kernel renderer subclasses its dialect, which
    subclasses this (`native.ops.NativeC` -> `native.kernel.CKernel`, `cuda.ops.CudaC` ->
    `cuda.renderer._Renderer`). Class attributes are the dialect: `code_for_op` (a ChainMap of
    its overrides over `CODE_FOR_OP`), `unfused` (fusible primitives it prints no expression
    for, with the reason), `qualifier` (of its helper functions). An instance renders one
    kernel `layout` (`backends.layout.KernelLayout`); every name it prints is prefixed:
    `p_` pointers, `v_` values.

    Example:
        >>> CStyleLanguage.store("out0", "float16", "i0", "v_t1")
        'p_out0[i0] = fg_f2h(v_t1);'
    """

    code_for_op = CODE_FOR_OP
    unfused = {}
    qualifier = "static inline"

    def __init__(self, layout):
        self.layout = layout
        spec = layout.spec
        self.dtypes = {inp.name: inp.dtype for inp in spec.inputs}
        self.dtypes.update({i.dst: i.dtype for i in spec.body})
        for i in spec.body:
            ctype(i.dtype)

    # --- types and literals ------------------------------------------------------------------

    ctype = staticmethod(ctype)
    storage = staticmethod(storage)
    literal = staticmethod(literal)

    def value_type(self, dtype):
        """The C type a kernel value of `dtype` is held in."""
        return ctype(dtype)

    def pointee(self, dtype):
        """The C type a kernel's array of `dtype` points to."""
        return storage(dtype)

    def cast(self, text, dtype, to):
        """C expression `text` of `dtype` converted to the compute type of `to`."""
        return text if ctype(dtype) == ctype(to) else f"({ctype(to)}){text}"

    # --- the statements of one element -------------------------------------------------------

    def load(self, name, dtype, offset):
        """The declaration of `v_<name>`, element `offset` of array `p_<name>`."""
        text = f"p_{name}[{offset}]"
        if dtype in NARROW:
            text = f"{NARROW[dtype].load}({text})"
        elif dtype == "bool" and self.pointee(dtype) != "bool":  # the bytes 0 and 1
            text = f"({text} != 0)"
        return f"const {self.value_type(dtype)} v_{name} = {text};"

    def instr(self, instr, note=None):
        """The declaration of `v_<dst>` computing fusion `Instr` `instr`, rounded to its
        dtype when that is a narrow float, with comment `note` (already escaped)."""
        args, dts = operands(instr, self.dtypes)
        text = self.expression(instr, args, dts)
        if instr.dtype in NARROW:
            text = f"{NARROW[instr.dtype].round}({text})"
        line = f"const {self.value_type(instr.dtype)} v_{instr.dst} = {text};"
        return line + (f"  /* {note} */" if note else "")

    def expression(self, instr, args, arg_dtypes):
        """The C expression of `instr` over operand expressions `args` (a dialect's renderer
        may print some instructions otherwise)."""
        return expr(self.code_for_op, instr, args, arg_dtypes)

    @staticmethod
    def store(name, dtype, offset, value):
        """The statement storing C expression `value` into element `offset` of array
        `name`: `p_<name>[offset] = value;`, converted to the storage of a narrow float."""
        if dtype in NARROW:
            value = f"{NARROW[dtype].store}({value})"
        return f"p_{name}[{offset}] = {value};"

    # --- reductions (derived from their `ReduceOp`) -----------------------------------------

    @staticmethod
    def identity(op, dtype, acc_dtype):
        """The identity of reduction `op` (a `ReduceOp`'s name) over `dtype`, as a literal of
        `acc_dtype`."""
        return literal(ReduceOp.named(op).identity(np.dtype(dtype)), acc_dtype)

    def combine(self, op, acc, value, acc_dtype, dtype):
        """C expression folding `value` into accumulator `acc` (of `acc_dtype`) for reduction
        `op` over `dtype`: the dialect's expression of the op's `combine` primitive, in the
        accumulator's dtype, or, for an op that selects (max, min) over floats, in the
        value's dtype, whose tie rule numpy's fold follows (float16 keeps the first of equal
        values). (Never a bool's `||`: it would skip a warp shuffle in its operand.)"""
        rec = ReduceOp.named(op)
        rule = self.code_for_op.get(rec.combine)
        if rule is None:
            raise Unsupported(f"reduction {op}: no C expression for its combine "
                              f"{rec.combine.name}")
        dt = dtype if rec.selects and np.dtype(dtype).kind == "f" else acc_dtype
        return rule([acc, value], [dt, dt], {})

    def zero_sign(self, r, acc, loops, body):
        """Lines giving a float max/min reduction's zero result numpy's sign: numpy folds
        its binary maximum/minimum left to right, which of equal values keeps the later one
        (float16: the earlier), so a zero result has the sign of the row's last (first)
        zero. A renderer whose lanes fold interleaved elements loses that order; when the
        result `acc` is 0 (rarely: nothing is read again otherwise) these lines read the row
        again through `loops` (headers in `scan_backward(r)` order) and `body` (the
        statements computing `v_<r.value>`) and take the first zero they meet. [] for
        other reductions."""
        if not ReduceOp.named(r.op).selects or _kind(r.dtype) != "f":
            return []
        v, label = f"v_{r.value}", f"fg_zero_{acc}"
        lines, depth = [f"if ({acc} == 0) {{"], 1
        for head in loops:
            lines.append("    " * depth + head)
            depth += 1
        lines += ["    " * depth + ln for ln in body]
        lines.append("    " * depth + f"if ({v} == 0) {{ {acc} = {v}; goto {label}; }}")
        lines += ["    " * d + "}" for d in reversed(range(depth))]
        return lines + [f"{label}:;"]

    @staticmethod
    def scan_backward(r):
        """Whether `zero_sign` reads the row from its last element (numpy keeps the last
        of equal values; float16's loops keep the first)."""
        return r.dtype != "float16"

    # --- the prelude's shared helpers --------------------------------------------------------

    @classmethod
    def half_source(cls):
        """Portable C of `fg_half` (float16 as its 16 bits) and its conversions from and to
        float, round to nearest even (a dialect with hardware conversions prints its own)."""
        return half_source(cls.qualifier)

    @classmethod
    def special_values_source(cls):
        """C of `fg_inf[f]()` and `fg_nan[f]()` from <math.h>'s INFINITY and NAN."""
        return special_values_source(cls.qualifier)

    @classmethod
    def helpers_source(cls):
        """C of the helpers the shared expressions call, on top of the dialect's `fg_half`
        conversions, special values and `fg_max`/`fg_min`."""
        q = cls.qualifier
        return (f"{q} float fg_round_half(float x) {{ return fg_h2f(fg_f2h(x)); }}\n"
                f"{q} float fg_round_half_d(double x) {{ return fg_h2f(fg_d2h(x)); }}\n"
                + half_minmax_source(q) + digamma_source(q) + half_nextafter_source(q)
                + bfloat16_source(q))


def half_source(qualifier):
    """Portable C (and C++) of `fg_half` and `fg_h2f`/`fg_f2h`/`fg_d2h` (from double in one
    rounding), functions declared with `qualifier`; needs <math.h> and <string.h>."""
    q = qualifier
    return f"""typedef struct {{ unsigned short x; }} fg_half;
{q} float fg_h2f(fg_half h) {{
    const unsigned s = (h.x & 0x8000u) << 16, e = (h.x >> 10) & 0x1f, m = h.x & 0x3ff;
    unsigned bits;
    if (e == 0x1f) bits = s | 0x7f800000u | (m << 13);
    else if (e) bits = s | ((e + 112) << 23) | (m << 13);
    else if (!m) bits = s;
    else {{ float f = ldexpf((float)m, -24); memcpy(&bits, &f, 4); bits |= s; }}
    float f; memcpy(&f, &bits, 4); return f;
}}
{q} fg_half fg_f2h(float f) {{
    unsigned b; memcpy(&b, &f, 4);
    const unsigned short s = (b >> 16) & 0x8000;
    const float a = fabsf(f);
    fg_half h;
    if (a != a) {{ h.x = s | 0x7e00; return h; }}
    if (a >= 65520.0f) {{ h.x = s | 0x7c00; return h; }}
    if (a < 6.103515625e-05f) {{ h.x = s | (unsigned short)nearbyintf(a * 16777216.0f); return h; }}
    unsigned ab; memcpy(&ab, &a, 4);
    unsigned mant = ab & 0x7fffff, exp = (ab >> 23) - 112;
    unsigned r = (exp << 10) | (mant >> 13);
    const unsigned rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) ++r;
    h.x = s | (unsigned short)r; return h;
}}
/* double -> half in one rounding: first to float rounding to odd (toward zero, then the last
   bit set when inexact: 24 bits keep the 11 + 2 a correct second rounding needs) */
{q} fg_half fg_d2h(double x) {{
    float f = (float)x;
    if (f == f && (double)f != x) {{
        if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
        unsigned b; memcpy(&b, &f, 4); b |= 1u; memcpy(&f, &b, 4);
    }}
    return fg_f2h(f);
}}
"""


def bfloat16_source(qualifier):
    """Portable C (and C++, CUDA) of `fg_bf16` (bfloat16 as its 16 bits) and its helpers,
    bit for bit ml_dtypes': `fg_bf2f`; `fg_f2bf` (round to nearest even, a NaN to the quiet
    NaN 0x7fc0 with its sign); `fg_d2bf` (from double in one rounding: to float rounding to
    odd first); `fg_round_bf16[_d]`; `fg_nextafter_bf16` (ml_dtypes' nextafter: the target
    when equal, a positive NaN for a NaN operand). Needs <math.h>."""
    q = qualifier
    return f"""typedef struct {{ unsigned short x; }} fg_bf16;
typedef union {{ float f; unsigned u; }} fg_f32_bits;
{q} float fg_bf2f(fg_bf16 h) {{ fg_f32_bits c; c.u = (unsigned)h.x << 16; return c.f; }}
{q} fg_bf16 fg_f2bf(float f) {{
    fg_f32_bits c; c.f = f;
    fg_bf16 h;
    h.x = (unsigned short)(f != f ? ((c.u >> 16) & 0x8000u) | 0x7fc0u
                                  : (c.u + 0x7fffu + ((c.u >> 16) & 1u)) >> 16);
    return h;
}}
{q} fg_bf16 fg_d2bf(double x) {{
    fg_f32_bits c; c.f = (float)x;
    if (c.f == c.f && (double)c.f != x) {{
        if (fabs((double)c.f) > fabs(x)) c.f = nextafterf(c.f, 0.0f);
        c.u |= 1u;
    }}
    return fg_f2bf(c.f);
}}
{q} float fg_round_bf16(float x) {{ return fg_bf2f(fg_f2bf(x)); }}
{q} float fg_round_bf16_d(double x) {{ return fg_bf2f(fg_d2bf(x)); }}
{q} float fg_nextafter_bf16(float x, float y) {{
    if (x != x || y != y) return fg_nanf();
    if (x == y) return y;
    fg_f32_bits c; c.f = x;
    unsigned b = c.u >> 16;
    if (x == 0.0f) b = y > 0.0f ? 0x0001u : 0x8001u;
    else if ((x < y) == (x > 0.0f)) ++b;
    else --b;
    c.u = b << 16;
    return c.f;
}}
"""


def half_minmax_source(qualifier):
    """C of `fg_maxh`/`fg_minh`: numpy's float16 maximum/minimum (NaN first, else the first
    operand on a tie: maximum(+0, -0) is +0 for float16, -0 for float32), on halves held in
    floats."""
    q = qualifier
    return (f"{q} float fg_maxh(float a, float b) {{ return (a >= b || a != a) ? a : b; }}\n"
            f"{q} float fg_minh(float a, float b) {{ return (a <= b || a != a) ? a : b; }}\n")


def special_values_source(qualifier):
    """C of `fg_inf[f]()` and `fg_nan[f]()`, declared with `qualifier`; needs <math.h>."""
    q = qualifier
    return (f"{q} float fg_inff(void) {{ return INFINITY; }}\n"
            f"{q} float fg_nanf(void) {{ return NAN; }}\n"
            f"{q} double fg_inf(void) {{ return INFINITY; }}\n"
            f"{q} double fg_nan(void) {{ return NAN; }}\n")


def digamma_source(qualifier):
    """C source of `fg_digamma`/`fg_digammaf` (the shared helper every C-like backend's
    prelude holds), each function declared with `qualifier` ("static inline",
    "__device__ __forceinline__")."""
    return f"""{qualifier} double fg_digamma(double x) {{
    const double pi = 3.141592653589793;
    const bool refl = x < 0.5;
    double z = refl ? 1.0 - x : x, acc = 0.0;
    while (z < 10.0) {{ acc -= 1.0 / z; z += 1.0; }}
    const double iz2 = 1.0 / (z * z);
    double r = log(z) - 0.5 / z - iz2 * (1.0 / 12 - iz2 * (1.0 / 120 - iz2 * (1.0 / 252 - iz2 * (
        1.0 / 240 - iz2 * (1.0 / 132 - iz2 * (691.0 / 32760 - iz2 / 12)))))) + acc;
    if (refl) r -= pi / tan(pi * (x - rint(x)));
    return (x <= 0.0 && x == floor(x)) ? fg_nan() : r;
}}
{qualifier} float fg_digammaf(float x) {{ return (float)fg_digamma((double)x); }}
"""


def half_nextafter_source(qualifier):
    """C source of `fg_nextafter_half(x, y)`: the float16 after float16 `x` towards `y`, both
    held in floats (a float32 `nextafterf` steps a float32 ulp, which rounds back to `x`), by
    the half's bits, as numpy's float16 nextafter; it uses the prelude's `fg_half` helpers."""
    return f"""{qualifier} float fg_nextafter_half(float x, float y) {{
    if (x != x || y != y) return x + y;
    if (x == y) return x;  /* numpy's float16 keeps x (-0 towards +0 is -0) */
    fg_half h = fg_f2h(x);
    if (x == 0.0f) h.x = y > 0.0f ? 0x0001 : 0x8001;
    else if ((x < y) == (x > 0.0f)) ++h.x;
    else --h.x;
    return fg_h2f(h);
}}
"""
