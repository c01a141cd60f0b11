"""IR-to-IR optimization passes run by jit before fusion.

Each pass is a pure function `ClosedJaxpr -> ClosedJaxpr` that can be tested alone and
returns its argument unchanged (the same object) when it has nothing to do:

- `inline_calls`: splice the bodies of nested `jit` calls (and custom-derivative and
  checkpoint calls) into the caller;
- `dce`: drop equations whose results are unused (effectful ones are kept);
- `cse`: merge equations that apply the same primitive to the same operands;
- `fold_constants`: evaluate equations whose operands are all literals or small consts;
- `simplify`: algebraic identities (`x*1`, `x+0`, `neg(neg(x))`, transpose of transpose...).

This module reads primitives through what they declare (`kind`, `rank0_operands`,
`effectful`, `calls_body`), their params and eager implementations; an algebraic identity
names the lax primitives it holds for.
"""

import weakref

import numpy as np

from funcgrad import dtypes, lax
from funcgrad.core import Array, ClosedJaxpr, Eqn, Jaxpr, Literal, Var, bind_at, set_trace
from funcgrad.core.nesting import nests

# --- helpers ---------------------------------------------------------------------------------


def has_effects(eqn):
    """True when `eqn` must run even if its results are unused (e.g. `debug.print`),
    including a higher-order equation whose sub-program contains such an equation."""
    if getattr(eqn.prim, "effectful", False):
        return True
    return bool(eqn.params) and any(_program_has_effects(j) for j in _subjaxprs(eqn))


_effects = weakref.WeakKeyDictionary()  # Jaxpr -> has_effects of one of its equations


@nests
def _program_has_effects(jaxpr):
    """Once per program (the IR is immutable): every pass asks for every equation, and a
    program nested 100 deep would be walked once per enclosing level."""
    found = _effects.get(jaxpr)
    if found is None:
        found = _effects[jaxpr] = any(has_effects(e) for e in jaxpr.eqns)
    return found


def _subjaxprs(eqn):
    for v in eqn.params.values():
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, Jaxpr):
                yield x


def _is_higher_order(eqn):
    return next(_subjaxprs(eqn), None) is not None


class _Subst(dict):
    """var -> replacement atom; `read` follows chains of replacements."""

    def read(self, a):
        while type(a) is not Literal and a in self:
            a = self[a]
        return a

    def eqn(self, eqn):
        if not self:
            return eqn
        ins = [self.read(a) for a in eqn.invars]
        if all(x is y for x, y in zip(ins, eqn.invars)):
            return eqn
        return eqn._replace(invars=ins)


def _rebuild(closed, eqns, subst, constvars=None, consts=None):
    j = closed.jaxpr
    outs = [subst.read(v) for v in j.outvars]
    cvars = j.constvars if constvars is None else constvars
    jaxpr = Jaxpr(list(cvars), list(j.invars), outs, list(eqns))
    return ClosedJaxpr(jaxpr, list(closed.consts if consts is None else consts))


def _unchanged(closed, eqns, subst):
    old = closed.jaxpr.eqns
    return (not subst and len(eqns) == len(old) and all(a is b for a, b in zip(eqns, old)))


# --- inlining --------------------------------------------------------------------------------


def _is_call(eqn):
    """A primitive declared `calls_body` (it applies its `jaxpr` param to its operands; its
    other params only matter to transforms): at compile time a plain call."""
    body = eqn.params.get("jaxpr")
    if not eqn.prim.calls_body or not isinstance(body, (ClosedJaxpr, Jaxpr)):
        return False
    body = body.jaxpr if isinstance(body, ClosedJaxpr) else body
    return len(body.invars) == len(eqn.invars) and len(body.outvars) == len(eqn.outvars)


def inline_calls(closed, should_inline=None):
    """Replace each call equation (`jit`, and `custom_jvp_call`, `custom_vjp_call`,
    `checkpoint`, whose derivative rules no longer matter) by the equations of its body.

    Inner variables are renamed, so one body can be inlined at several call sites; inner
    consts (normally none: jit turns them into inputs) become consts of the result.

    Args:
        closed: the ClosedJaxpr to rewrite.
        should_inline: optional predicate on a call equation; by default every call.

    Example:
        { lambda ; a. let b = jit[jaxpr={ lambda ; c. let d = sin c in (d,) }] a in (b,) }
        becomes { lambda ; a. let b = sin a in (b,) }
    """
    pred = should_inline or (lambda eqn: True)
    if not any(_is_call(e) and pred(e) for e in closed.jaxpr.eqns):
        return closed
    constvars, consts = list(closed.jaxpr.constvars), list(closed.consts)
    eqns = []

    def splice(jaxpr, args, inner_consts, env):
        for v, c in zip(jaxpr.constvars, inner_consts):
            env[v] = Var(v.aval)
            constvars.append(env[v])
            consts.append(c)
        env.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            ins = [a if type(a) is Literal else env.get(a, a) for a in eqn.invars]
            if _is_call(eqn) and pred(eqn):
                sub = eqn.params["jaxpr"]
                sj, sc = (sub.jaxpr, sub.consts) if isinstance(sub, ClosedJaxpr) else (sub, [])
                outs = splice(sj, ins, sc, {})
                env.update(zip(eqn.outvars, outs))
                continue
            if env is top:
                outs = eqn.outvars
            else:
                outs = [Var(v.aval) for v in eqn.outvars]
                env.update(zip(eqn.outvars, outs))
            eqns.append(Eqn(eqn.prim, ins, outs, eqn.params, eqn.source))
        return [a if type(a) is Literal else env.get(a, a) for a in jaxpr.outvars]

    top = {}
    outs = splice(closed.jaxpr, closed.jaxpr.invars, [], top)
    jaxpr = Jaxpr(constvars, list(closed.jaxpr.invars), outs, eqns)
    return ClosedJaxpr(jaxpr, consts)


# --- dead code elimination -------------------------------------------------------------------


def dce(closed):
    """Drop equations none of whose results is used (unless they have effects) and unused
    consts. Inputs are kept: the signature does not change."""
    j = closed.jaxpr
    live = {v for v in j.outvars if type(v) is not Literal}
    kept = []
    for eqn in reversed(j.eqns):
        if any(v in live for v in eqn.outvars) or has_effects(eqn):
            kept.append(eqn)
            live.update(a for a in eqn.invars if type(a) is not Literal)
    kept.reverse()
    used = [i for i, v in enumerate(j.constvars) if v in live]
    if len(kept) == len(j.eqns) and len(used) == len(j.constvars):
        return closed
    jaxpr = Jaxpr([j.constvars[i] for i in used], list(j.invars), list(j.outvars), kept)
    return ClosedJaxpr(jaxpr, [closed.consts[i] for i in used])


# --- common subexpression elimination --------------------------------------------------------


def _atom_key(a):
    if type(a) is Literal:
        v = np.asarray(a.val, a.aval.dtype)
        return ("lit", v.dtype.str, v.tobytes(), a.aval.weak_type)
    return a


def _param_key(params):
    return tuple(sorted((k, type(v).__name__, v) for k, v in params.items()))


def cse(closed):
    """Merge equations that apply one primitive, with equal params, to the same operands
    (literals compare by dtype and bits), and consts bound to the same array object."""
    j = closed.jaxpr
    subst = _Subst()
    first_const = {}
    for v, c in zip(j.constvars, closed.consts):
        prev = first_const.setdefault(id(c), v)
        if prev is not v:
            subst[v] = prev
    seen, eqns = {}, []
    for eqn in j.eqns:
        eqn = subst.eqn(eqn)
        if not has_effects(eqn):
            key = (eqn.prim, tuple(_atom_key(a) for a in eqn.invars), _param_key(eqn.params))
            try:
                prev = seen.get(key)
            except TypeError:  # an unhashable param: never merged
                prev, key = None, None
            if prev is not None:
                subst.update(zip(eqn.outvars, prev))
                continue
            if key is not None:
                seen[key] = eqn.outvars
        eqns.append(eqn)
    if _unchanged(closed, eqns, subst):
        return closed
    return dce(_rebuild(closed, eqns, subst))


# --- constant folding ------------------------------------------------------------------------


def fold_constants(closed, max_input_size=64, max_output_size=1 << 16):
    """Evaluate, at compile time, equations whose operands are all literals or consts of at
    most `max_input_size` elements, through the primitive's eager implementation.

    A rank-0 result becomes a literal; a larger one (at most `max_output_size` elements)
    becomes a new const, never a literal. Broadcasts are not folded: a kernel reads a
    broadcast scalar for free, while a folded broadcast would be a large const.
    """
    j = closed.jaxpr
    known = {v: c for v, c in zip(j.constvars, closed.consts)
             if np.size(_value(c)) <= max_input_size}
    subst = _Subst()
    constvars, consts, eqns = list(j.constvars), list(closed.consts), []
    for eqn in j.eqns:
        eqn = subst.eqn(eqn)
        outs = _fold(eqn, known, max_output_size)
        if outs is None:
            eqns.append(eqn)
            continue
        for v, out in zip(eqn.outvars, outs):
            val = out._value
            if val.ndim == 0:
                subst[v] = Literal(val[()], v.aval)
            else:
                nv = Var(v.aval)
                constvars.append(nv)
                consts.append(out)
                subst[v] = nv
                if val.size <= max_input_size:
                    known[nv] = out
    if _unchanged(closed, eqns, subst):
        return closed
    return dce(_rebuild(closed, eqns, subst, constvars, consts))


def _value(c):
    return c._value if isinstance(c, Array) else np.asarray(c)


def _fold(eqn, known, max_output_size):
    if not all(type(a) is Literal or a in known for a in eqn.invars):
        return None
    if (eqn.prim is lax.broadcast_in_dim_p or eqn.prim.impl_rule is None
            or has_effects(eqn) or _is_higher_order(eqn)
            or any(v.aval.size > max_output_size for v in eqn.outvars)):
        return None
    args = []
    for a in eqn.invars:
        if type(a) is Literal:
            args.append(Array(np.asarray(a.val, a.aval.dtype), a.aval.weak_type))
        else:
            c = known[a]
            args.append(c if isinstance(c, Array) else Array(np.asarray(c), a.aval.weak_type))
    try:
        with set_trace(None):
            out = bind_at(None, eqn.prim, args, eqn.params)
    except Exception:  # an error at run time stays an error at run time
        return None
    return out if eqn.prim.multiple_results else [out]


# --- algebraic simplification ----------------------------------------------------------------

def _scalar_value(a, defs):
    """The value of `a` when it is one scalar everywhere (a literal, or a broadcast or cast
    of one), else None. A loop, not a recursion: casts can chain for thousands of steps."""
    casts = []
    while type(a) is not Literal:
        d = defs.get(a)
        if d is None:
            return None
        if d.prim is lax.convert_element_type_p:
            casts.append(d.params["new_dtype"])
        elif d.prim is not lax.broadcast_in_dim_p:
            return None
        a = d.invars[0]
    v = np.asarray(a.val, a.aval.dtype)
    for dtype in reversed(casts):  # the innermost cast first
        v = v.astype(dtype)
    return v


def _is(a, value, defs):
    v = _scalar_value(a, defs)
    return v is not None and dtypes.kind(v.dtype) != "c" and bool(v == value)


def _same_type(a, out):
    return a.aval.shape == out.aval.shape and a.aval.dtype == out.aval.dtype


def _as_result(eqn, x):
    """`x` standing for `eqn`'s result: x itself, or a broadcast of a rank-0 x."""
    out = eqn.outvars[0]
    if _same_type(x, out):
        return x
    if x.aval.shape == () and x.aval.dtype == out.aval.dtype:
        params = {"shape": out.aval.shape, "broadcast_dimensions": ()}
        return Eqn(lax.broadcast_in_dim_p, [x], [out], params, eqn.source)
    return None


# (right identity, left identity): x op e == x, e op x == x (division: inexact dtypes only).
_IDENTITIES = {lax.mul_p: (1, 1), lax.add_p: (0, 0), lax.add_any_p: (0, 0),
               lax.sub_p: (0, None), lax.div_p: (1, None)}


def _identity_operand(eqn, defs):
    ids = _IDENTITIES.get(eqn.prim)
    if ids is None or (eqn.prim is lax.div_p
                       and dtypes.kind(eqn.outvars[0].aval.dtype) not in "fc"):
        return None
    ins = eqn.invars
    if _is(ins[1], ids[0], defs):
        return ins[0]
    if ids[1] is not None and _is(ins[0], ids[1], defs):
        return ins[1]
    return None


def _select_as_cast(eqn, defs):
    """select_n(p, 0, 1) with a boolean p is p cast to the cases' dtype."""
    if (eqn.prim is not lax.select_n_p or len(eqn.invars) != 3
            or dtypes.kind(eqn.invars[0].aval.dtype) != "b" or eqn.invars[0].aval.shape == ()
            or not (_is(eqn.invars[1], 0, defs) and _is(eqn.invars[2], 1, defs))):
        return None
    out = eqn.outvars[0]
    params = {"new_dtype": out.aval.dtype, "weak_type": out.aval.weak_type}
    return Eqn(lax.convert_element_type_p, [eqn.invars[0]], [out], params, eqn.source)


def _producer(a, defs, prim):
    d = defs.get(a) if type(a) is not Literal else None
    return d if d is not None and d.prim is prim else None


def _swapped_dot(eqn, defs, uses):
    """transpose(dot_general(a, b)) that swaps the two free-axis groups, where the product
    has no other use -> dot_general(b, a): the product comes out in the wanted layout."""
    d = _producer(eqn.invars[0], defs, lax.dot_general_p)
    if d is None or uses.get(eqn.invars[0], 0) != 1:
        return None
    (lc, rc), (lb, rb) = d.params["dimension_numbers"]
    a, b = d.invars
    nb = len(lb)
    nl = a.aval.ndim - len(lc) - nb
    nr = b.aval.ndim - len(rc) - nb
    want = (tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr))
            + tuple(range(nb, nb + nl)))
    if tuple(eqn.params["permutation"]) != want:
        return None
    params = {**d.params, "dimension_numbers": ((tuple(rc), tuple(lc)), (tuple(rb), tuple(lb)))}
    return Eqn(d.prim, [b, a], eqn.outvars, params, d.source)


def _simplify_view(eqn, defs):
    if not eqn.invars or len(eqn.outvars) != 1:  # iota, multi-output primitives
        return None
    prim, x, out, p = eqn.prim, eqn.invars[0], eqn.outvars[0], eqn.params
    identity = prim is lax.stop_gradient_p or prim.identity  # (checkpoint_name's name_p)
    if identity or (prim is lax.integer_pow_p and p["y"] == 1):
        return x
    if prim is lax.convert_element_type_p:
        return x if x.aval.dtype == out.aval.dtype else None
    if prim.kind == "reduction" and "axes" in p:  # over no axes: the identity
        return x if tuple(p["axes"]) == () and _same_type(x, out) else None
    if prim is lax.neg_p:
        d = _producer(x, defs, lax.neg_p)
        return d.invars[0] if d is not None else None
    if prim is lax.transpose_p:
        perm = tuple(p["permutation"])
        d = _producer(x, defs, lax.transpose_p)
        if d is not None:
            inner = d.params["permutation"]
            x, perm = d.invars[0], tuple(inner[i] for i in perm)
            if perm != tuple(range(len(perm))):
                return eqn._replace(invars=[x], params={**p, "permutation": perm})
        return x if perm == tuple(range(len(perm))) else None
    if prim is lax.reshape_p:
        d = _producer(x, defs, lax.reshape_p)
        if d is not None:
            x = d.invars[0]
            if x.aval.shape != out.aval.shape:
                return eqn._replace(invars=[x])
        return x if x.aval.shape == out.aval.shape else None
    if prim is lax.broadcast_in_dim_p:
        dims = tuple(p["broadcast_dimensions"])
        d = _producer(x, defs, lax.broadcast_in_dim_p)
        if d is not None:
            inner = d.params["broadcast_dimensions"]
            return eqn._replace(invars=[d.invars[0]], params={
                **p, "broadcast_dimensions": tuple(dims[i] for i in inner)})
        return x if x.aval.shape == out.aval.shape else None
    return None


def _scalar_operands(eqn, defs):
    """Replace broadcast-of-a-scalar operands of a binary op whose rank-0 operands
    broadcast (`rank0_operands`) by the scalar."""
    if not eqn.prim.rank0_operands or len(eqn.invars) != 2:
        return None
    shape = eqn.outvars[0].aval.shape
    ins = list(eqn.invars)
    for k in (0, 1):
        d = _producer(ins[k], defs, lax.broadcast_in_dim_p)
        other = ins[1 - k]
        if d is not None and d.invars[0].aval.shape == () and other.aval.shape == shape:
            ins[k] = d.invars[0]
    return eqn._replace(invars=ins) if any(a is not b for a, b in zip(ins, eqn.invars)) else None


def _simplify_eqn(eqn, defs, uses):
    """An atom, a replacement equation, or None (keep `eqn`)."""
    if eqn.prim.multiple_results or has_effects(eqn):
        return None
    if eqn.prim is lax.transpose_p:
        r = _swapped_dot(eqn, defs, uses)
        if r is not None:
            return r
    x = _identity_operand(eqn, defs)
    if x is not None:
        r = _as_result(eqn, x)
        if r is not None:
            return r
    r = _simplify_view(eqn, defs) or _select_as_cast(eqn, defs)
    if r is not None:
        return r
    return _scalar_operands(eqn, defs)


def simplify(closed):
    """Apply algebraic identities: x*1, 1*x, x+0, 0+x, x-0, x/1 (floats), neg(neg x),
    broadcasts to the same shape, broadcasts of broadcasts, transposes of transposes,
    reshapes of reshapes, casts to the same dtype, reductions over no axes, `select_n(p, 0, 1)`
    as a cast of p, and broadcast scalar operands of binary ops (`x + broadcast(2.0)` ->
    `x + 2.0`).

    Identities whose operand is a broadcast scalar (`x * full(shape, 1.0)`) also apply;
    `stop_gradient` is the identity; a transpose that swaps the free axes of a dot_general
    used only there becomes the dot_general of the swapped operands. Dead producers are
    left for `dce`.
    """
    defs, subst, eqns = {}, _Subst(), []
    uses = {}
    for e in closed.jaxpr.eqns:
        for a in e.invars:
            if type(a) is not Literal:
                uses[a] = uses.get(a, 0) + 1
    for v in closed.jaxpr.outvars:
        if type(v) is not Literal:
            uses[v] = uses.get(v, 0) + 1
    for eqn in closed.jaxpr.eqns:
        eqn = subst.eqn(eqn)
        for _ in range(8):
            r = _simplify_eqn(eqn, defs, uses)
            if not isinstance(r, Eqn):
                break
            eqn = r
        else:
            r = None
        if r is None:
            eqns.append(eqn)
            if not eqn.prim.multiple_results:
                defs[eqn.outvars[0]] = eqn
        else:
            subst[eqn.outvars[0]] = r
    if _unchanged(closed, eqns, subst):
        return closed
    return _rebuild(closed, eqns, subst)
