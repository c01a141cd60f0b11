"""One instruction becomes numpy statements: the emitter shared by the whole-array renderer
(`render.py`) and the row-chunked loops (`chunked.py`).

    found = instruction_rule(instr, dtypes)        # the table's expression, or None
    text, kind = expression(r, instr, eqn, found, dtypes, operand)
    into("b3", text, kind)       # np.add(x0, a1, out=b3)   or  np.copyto(b3, <text>)
    assign("v2", text, kind, shape, dtype, natural, existing)   # a whole value

`ops.py`'s tables speak numpy ("ufunc": takes `out=`, "ufunc!": must be given one, "out":
takes an `out=` that is none of its operands, "fresh": allocates, "view"); `MEMORY_KIND`
says what each means to the backend-neutral memory planner (`funcgrad.compiler.memory`),
and from here on a value's kind is the planner's. A primitive in no table is a library
call: its eager implementation bound as a constant of the generated function, constants
passed to it as typed numpy scalars. Imports `ops`, `runtime` and the planner's
vocabulary; never the renderers.
"""

import numpy as np

from funcgrad.backends.numpy import ops
from funcgrad.backends.numpy.runtime import LibCall
from funcgrad.compiler import memory

MEMORY_KIND = {"ufunc": memory.ANY_BUFFER, "out": memory.FREE_BUFFER,
               "fresh": memory.NEW_ARRAY, "view": memory.VIEW, "alias": memory.ALIAS}


def instruction_rule(instr, dtypes):
    """(expression with `{0}`, `{1}`... for the operands and an `{out}` slot, memory kind,
    must be given a buffer) for kernel instruction `instr` with operand `dtypes`, from
    `ops.elementwise_rule`; None when it has no expression (a library call)."""
    rule = ops.elementwise_rule(instr.op)
    if rule is None or narrow(list(dtypes) + [np.dtype(instr.dtype)]):
        return None
    consts = [None if isinstance(a, str) else a.value for a in instr.args]
    found = rule([f"{{{k}}}" for k in range(len(instr.args))], dtypes, instr.param_dict, consts)
    if found is None:
        return None
    expr, kind = found
    return expr, MEMORY_KIND[kind.rstrip("!")], kind.endswith("!")


def call_rule(r, eqn):
    """(expression with an `{out}` slot, memory kind) of an equation outside kernels from
    `ops.CALLS`, or None (a library call; also one computing on a narrow dtype: views,
    which only move data, are exact on them)."""
    table = ops.CALLS.get(eqn.prim)
    computes = eqn.prim.kind != "view" and narrow(
        [v.aval.dtype for v in list(eqn.invars) + list(eqn.outvars)])
    found = (table(r, eqn, [f"{{{k}}}" for k in range(len(eqn.invars))])
             if table is not None and not computes else None)
    return None if found is None else (found[0], MEMORY_KIND[found[1]])


def narrow(dts):
    """Whether any of `dts` is an ml_dtypes type (bfloat16, a float8, int4...): numpy
    computes those only through the eager implementation, which widens them
    (`core.widened`), so an instruction or call on them is a library call."""
    return any(np.dtype(d).num >= 256 for d in dts)


def operand_dtypes(instr, dtype_of):
    """The dtypes of `instr`'s operands (`dtype_of(name)` for values)."""
    return [np.dtype(a.dtype) if not isinstance(a, str) else np.dtype(dtype_of(a))
            for a in instr.args]


def literal(const, args, dtypes):
    """Source of constant operand `const` among `args`: a plain Python literal when a value
    operand has its dtype (numpy then keeps that dtype), else typed (`np.float32(2.0)`);
    always typed for a library call (`dtypes` None)."""
    typed = dtypes is None or not any(isinstance(b, str) and dt == np.dtype(const.dtype)
                                      for b, dt in zip(args, dtypes))
    return ops.literal(const.value, const.dtype, typed)


def library_call(r, eqn):
    """Bind the eager implementation of `eqn`'s primitive (params bound, results cast to the
    IR's dtypes) as a constant of `r`'s generated function; returns its name."""
    fn = LibCall(eqn.prim, eqn.params, [v.aval for v in eqn.outvars])
    return r.constant(fn, f"_{ops.ident(eqn.prim.name)}_")


def expression(r, instr, eqn, found, dtypes, operand):
    """(source with an `{out}` slot, memory kind) computing kernel instruction `instr`: the
    table's expression `found`, or a library call when `found` is None. `operand(name)` is
    the source of a value operand."""
    args = [operand(a) if isinstance(a, str)
            else literal(a, instr.args, None if found is None else dtypes) for a in instr.args]
    if found is None:
        return f"{library_call(r, eqn)}({', '.join(args)})", memory.ALIAS
    return found[0].format(*args, out="{out}"), found[1]


def shape_text(shape):
    """`(4,)`, `(4, 8)`: a shape as source."""
    shape = tuple(shape)
    return f"({shape[0]},)" if len(shape) == 1 else str(shape)


def allocate(name, shape, dtype):
    """`b0 = np.empty((4, 8), np.float32)`."""
    return f"{name} = np.empty({shape_text(shape)}, {ops.dtype_text(dtype)})"


def allocated_name(line):
    """The name a line of `allocate` binds, else None (`native.program` moves such lines)."""
    head, sep, rest = line.partition(" = np.empty(")
    return head if sep and head.isidentifier() and rest.endswith(")") else None


def _with_out(text, buffer):
    return text.format(out=f", out={buffer}")


def into(buffer, text, kind):
    """The statement writing `text` (of memory kind `kind`) into the existing array
    `buffer`: through `out=` when the kind writes into a buffer, else as a copy."""
    if kind in memory.WRITES_INTO:
        return _with_out(text, buffer)
    return f"np.copyto({buffer}, {text.format(out='')})"


def assign(name, text, kind, shape, dtype, natural, existing):
    """Statements computing `text` (with an `{out}` slot) as the whole value `name` of
    `shape` and `dtype`: into its buffer when the plan gave it an `existing` one, into a new
    one when its kind writes into buffers, else bound as it comes (broadcast or copied to
    `shape` when needed). `natural` is the shape `text` has by itself (None: it must be
    given a buffer)."""
    shape = tuple(shape)
    writes = kind in memory.WRITES_INTO
    if writes and existing:
        return [_with_out(text, name)]
    if (writes and (natural is None or tuple(natural) != shape)
            or kind == memory.SCALAR and natural is None):
        return [allocate(name, shape, dtype), _with_out(text, name)]
    plain = text.format(out="")
    if kind == memory.NEW_ARRAY and tuple(natural) != shape:
        return [allocate(name, shape, dtype), f"np.copyto({name}, {plain})"]
    if kind == memory.ALIAS and tuple(natural) != shape:
        plain = f"np.broadcast_to({plain}, {shape_text(shape)})"
    return [f"{name} = {plain}"]
