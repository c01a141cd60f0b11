"""The IR: abstract values, variables, literals, equations and programs (jaxprs).

A `Jaxpr` is a straight-line program of `Eqn`s, each applying one primitive to
variables or literals and defining one or more output variables. Programs are
immutable and printed in a jaxpr-like text form (names are given at print time).
This module imports numpy and funcgrad.dtypes only (and weakref).
"""

import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from funcgrad import dtypes


class ShapedArray:
    """The abstract value of an array: shape, dtype and weak type.

    `vma` types values inside `shard_map` and `vmap(axis_name=...)`: the frozenset of mesh
    axis names the value varies over (None: untyped, outside them). It is not part of
    equality or hashing, so code that does not use named axes never sees it.

    Example:
        >>> ShapedArray((3,), np.dtype("float32"))
        f32[3]
    """

    __slots__ = ("shape", "dtype", "weak_type", "vma")

    def __init__(self, shape, dtype, weak_type=False, vma=None):
        self.shape = shape
        self.dtype = dtype
        self.weak_type = weak_type
        self.vma = vma

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def strip_weak(self):
        return ShapedArray(self.shape, self.dtype, False, self.vma) if self.weak_type else self

    def update(self, shape=None, dtype=None, weak_type=None, vma=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type,
                           self.vma if vma is None else vma)

    def str_short(self):
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    __repr__ = str_short


class Var:
    """A variable of the IR; identity is the object itself, names come at print time."""

    __slots__ = ("aval", "__weakref__")

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in the IR (Python scalars, 0-d values)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val!r})"


class Eqn(NamedTuple):
    """`outvars = prim[params] invars`; `source` is the user's (file, line, function)."""

    prim: Any
    invars: list
    outvars: list
    params: dict
    source: Any = None


@dataclass(frozen=True, eq=False)
class Jaxpr:
    """A typed, straight-line program: `{ lambda constvars ; invars. let eqns in outvars }`."""

    constvars: list
    invars: list
    outvars: list
    eqns: list

    def __str__(self):
        return pp_jaxpr(self)

    __repr__ = __str__

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]


@dataclass(frozen=True, eq=False)
class ClosedJaxpr:
    """A `Jaxpr` together with the values of its constvars."""

    jaxpr: Jaxpr
    consts: list

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__


# --- printing ------------------------------------------------------------------------------

def _name(i):
    s = ""
    while True:
        s = chr(ord("a") + i % 26) + s
        i = i // 26 - 1
        if i < 0:
            return s


class _Names:
    def __init__(self):
        self.names = {}

    def __call__(self, v):
        if isinstance(v, Literal):
            return _pp_literal(v)
        n = self.names.get(v)
        if n is None:
            n = self.names[v] = _name(len(self.names))
        return n

    def decl(self, v):
        return f"{self(v)}:{v.aval.str_short()}"


def _pp_literal(lit):
    val = lit.val
    if isinstance(val, np.ndarray) or isinstance(val, np.generic):
        val = val.item() if np.ndim(val) == 0 else val
    if isinstance(val, bool):
        text = str(val)
    elif isinstance(val, float):
        text = repr(val)
    else:
        text = str(val)
    return f"{text}:{lit.aval.str_short()}"


def _pp_param(value, names, indent):
    if isinstance(value, Jaxpr):
        return _pp(value, names, indent + 4)
    if isinstance(value, ClosedJaxpr):
        return _pp(value.jaxpr, names, indent + 4)
    if isinstance(value, np.dtype):
        return dtypes.short_name(value)
    if isinstance(value, tuple) and value and isinstance(value[0], (Jaxpr, ClosedJaxpr)):
        return "(" + " ".join(_pp_param(v, names, indent) for v in value) + ")"
    if callable(value) and not isinstance(value, type):
        return getattr(value, "__name__", type(value).__name__)
    return str(value)


def _pp_eqn(eqn, names, indent):
    lhs = " ".join(names.decl(v) for v in eqn.outvars) or "_"
    params = ""
    shown = {k: v for k, v in eqn.params.items() if not k.startswith("_")}
    if shown:
        params = "[" + " ".join(f"{k}={_pp_param(v, names, indent)}"
                                for k, v in sorted(shown.items())) + "]"
    args = " ".join(names(v) for v in eqn.invars)
    return f"{lhs} = {eqn.prim.name}{params} {args}".rstrip()


def _pp(jaxpr, names, indent=0):
    consts = " ".join(names.decl(v) for v in jaxpr.constvars)
    ins = " ".join(names.decl(v) for v in jaxpr.invars)
    head = f"{{ lambda {consts}; {ins}. let" if consts else f"{{ lambda ; {ins}. let"
    eqns = [_pp_eqn(e, names, indent) for e in jaxpr.eqns]
    outs = "(" + ", ".join(names(v) for v in jaxpr.outvars) + ("," if len(jaxpr.outvars) == 1
                                                              else "") + ")"
    one_line = f"{head} {' '.join(eqns)} in {outs} }}" if eqns else f"{head} in {outs} }}"
    if len(eqns) <= 1 and len(one_line) <= 80 and "\n" not in one_line:
        return one_line
    pad = " " * indent
    body = "".join(f"\n{pad}    {e}" for e in eqns)
    return f"{head}{body}\n{pad}  in {outs} }}"


def pp_jaxpr(jaxpr):
    """The printed form of a jaxpr, e.g. `{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }`."""
    return _pp(jaxpr, _Names())


# --- checking ------------------------------------------------------------------------------

class JaxprTypeError(TypeError):
    pass


_checked = weakref.WeakSet()  # programs typechecked already (the IR is immutable)


def typecheck_jaxpr(jaxpr):
    """Re-derive every equation's output types and check every variable is defined once.
    A program checked before is not checked again (a sub-program shared by many programs,
    each level of a deeply nested one, costs one check)."""
    if jaxpr in _checked:
        return
    defined = set()

    def define(v):
        if v in defined:
            raise JaxprTypeError(f"variable {v} defined twice")
        defined.add(v)

    def read(x):
        if isinstance(x, Literal):
            return x.aval
        if x not in defined:
            raise JaxprTypeError(f"variable {x} used before it is defined")
        return x.aval

    for v in jaxpr.constvars + jaxpr.invars:
        define(v)
    for eqn in jaxpr.eqns:
        in_avals = [read(x) for x in eqn.invars]
        out = eqn.prim.abstract_eval(*in_avals, **eqn.params)
        out = out if eqn.prim.multiple_results else [out]
        got = [v.aval for v in eqn.outvars]
        if [(a.shape, a.dtype) for a in out] != [(a.shape, a.dtype) for a in got]:
            raise JaxprTypeError(f"equation {eqn.prim.name}: rule gives {out}, IR says {got}")
        for param in eqn.params.values():
            for sub in param if isinstance(param, tuple) else (param,):
                if isinstance(sub, (Jaxpr, ClosedJaxpr)):
                    typecheck_jaxpr(sub if isinstance(sub, Jaxpr) else sub.jaxpr)
        for v in eqn.outvars:
            define(v)
    for v in jaxpr.outvars:
        read(v)
    _checked.add(jaxpr)
