"""numpy-backend rules for the control-flow primitives: real Python `if`/`for`/`while`
statements around separately compiled bodies (never an unrolled program).

Each body program is compiled once, with the enclosing program, into its own generated
function, bound as a constant of the enclosing one and called from the loop. A scan writes
each iteration's outputs into preallocated stacked buffers. Registered into
`render.higher_order_rules` by primitive name; imports no funcgrad.lax module.

Example (a scan with one carry and one stacked output):

    v1, = a0,
    v2 = np.empty((100, 8), np.float32)
    for i0 in range(100):
        v1, y0, = body0(c0, v1, a1[i0, ...])
        v2[i0] = y0
"""

import numpy as np

from funcgrad.backends.numpy.render import higher_order_rules


def _body(r, closed, prefix):
    """Compile `closed` and bind its generated function (errors are reported by the
    enclosing program, which also sets numpy's error state)."""
    from funcgrad.compiler.pipeline import compile_jaxpr
    return r.constant(compile_jaxpr(closed)._fn, prefix)


def _tuple(names):
    return "".join(f"{n}, " for n in names).rstrip() if names else "()"


def _assign(lhs, rhs):
    """`a, b, = x, y,` (nothing when there is nothing to assign)."""
    return [f"{_tuple(lhs)} = {_tuple(rhs)}"] if lhs else []


def _call(fn, args, outs):
    target = _tuple(outs) if outs else "_"
    return f"{target} = {fn}({', '.join(args)})"


def _cond_rule(r, eqn):
    branches = eqn.params["branches"]
    index, args = r.read(eqn.invars[0]), [r.read(a) for a in eqn.invars[1:]]
    outs = r.output_names(eqn)
    lines = []
    for k, branch in enumerate(branches):
        fn = _body(r, branch, "branch")
        head = (f"if {index} <= 0:" if k == 0 else "else:" if k == len(branches) - 1
                else f"elif {index} == {k}:")
        lines += [head, "    " + _call(fn, args, outs)]
    return lines


def _while_rule(r, eqn):
    p = eqn.params
    ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
    args = [r.read(a) for a in eqn.invars]
    c_consts, b_consts, init = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
    outs = r.output_names(eqn)
    cond, body = _body(r, p["cond_jaxpr"], "cond"), _body(r, p["body_jaxpr"], "body")
    return _assign(outs, init) + [
        f"while {cond}({', '.join(c_consts + outs)})[0]:",
        "    " + _call(body, b_consts + outs, outs)]


def _scan_rule(r, eqn):
    p = eqn.params
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    args = [r.read(a) for a in eqn.invars]
    consts, init, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
    outs = r.output_names(eqn)
    carry, ys = outs[:nk], outs[nk:]
    body = _body(r, p["jaxpr"], "body")
    i = r.fresh_name("i")
    slices = [r.fresh_name("y") for _ in ys]
    lines = _assign(carry, init)
    for name, v in zip(ys, eqn.outvars[nk:]):
        lines.append(f"{name} = np.empty({tuple(v.aval.shape)}, np.{np.dtype(v.aval.dtype).name})")
    order = f"range({length - 1}, -1, -1)" if p["reverse"] else f"range({length})"
    lines.append(f"for {i} in {order}:")
    lines.append("    " + _call(body, consts + carry + [f"{x}[{i}, ...]" for x in xs],
                                carry + slices))
    lines += [f"    {y}[{i}] = {s}" for y, s in zip(ys, slices)]
    return lines


higher_order_rules["cond"] = _cond_rule
higher_order_rules["while"] = _while_rule
higher_order_rules["scan"] = _scan_rule
