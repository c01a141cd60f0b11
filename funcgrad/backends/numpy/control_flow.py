"""numpy-backend rules for the control-flow primitives: real Python `if`/`for`/`while`
statements around separately compiled bodies (never an unrolled program).

Each body program is compiled once, with the enclosing program, into its own generated
function (through the renderer's `compile_executable`, i.e. the callback the pipeline
passed), bound as a constant of the enclosing one and called from the loop. A scan writes
each iteration's outputs into preallocated stacked buffers. Registered into
`render.higher_order_rules` by primitive name; imports no funcgrad.lax module and no
compiler pass.

Example (a scan with one carry and one stacked output):

    v1, = a0,
    v2 = np.empty((100, 8), np.float32)
    for i0 in range(100):
        t0, t1, = body0(c0, v1, a1[i0, ...])
        v2[i0] = t1
        v1, = t0,
"""


from funcgrad.backends.numpy import ops
from funcgrad.backends.numpy.render import higher_order_rules
from funcgrad.core import ClosedJaxpr, Jaxpr, Literal
from funcgrad.lax.control_flow import cond_p, scan_p, while_p


def _body(r, closed, prefix):
    """Compile `closed` (with the pipeline's callback) and bind its generated function
    (errors are reported by the enclosing program, which also sets numpy's error state)."""
    return r.constant(r.compile_executable(closed)._fn, prefix)


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
    index, args = eqn.invars[0], [r.read(a) for a in eqn.invars[1:]]
    outs = r.output_names(eqn)
    if type(index) is Literal:  # a constant predicate: only the branch taken is compiled
        k = min(max(int(index.val), 0), len(branches) - 1)
        return [_call(_body(r, branches[k], "branch"), args, outs)]
    index, lines = r.read(index), []
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
    carry = r.output_names(eqn)[:nk]
    ys = [(r.name_of(v), v) for v in eqn.outvars[nk:] if v in r.used]  # unused ys: not computed
    j = p["jaxpr"].jaxpr
    kept = j.outvars[:nk] + [o for o, v in zip(j.outvars[nk:], eqn.outvars[nk:]) if v in r.used]
    program, sources = _distinct_outputs(p["jaxpr"], kept)
    body = _body(r, program, "body")
    i = r.fresh_name("i")
    inputs = args[:nc] + carry + [f"{x}[{i}, ...]" for x in args[nc + nk:]]
    temps = [r.fresh_name("t") for _ in program.jaxpr.outvars]
    expr = [inputs[k] if kind == "in" else temps[k] if kind == "out" else r.read(k)
            for kind, k in sources]
    lines = _assign(carry, args[nc:nc + nk])
    for name, v in ys:
        lines.append(f"{name} = np.empty({tuple(v.aval.shape)}, "
                     f"{ops.dtype_text(v.aval.dtype)})")
    order = f"range({length - 1}, -1, -1)" if p["reverse"] else f"range({length})"
    lines.append(f"for {i} in {order}:")
    if temps:
        lines.append("    " + _call(body, inputs, temps))
    lines += [f"    {y}[{i}] = {e}" for (y, _), e in zip(ys, expr[nk:])]
    lines += ["    " + line for line in _assign(carry, expr[:nk])]
    if lines[-1].startswith("for "):  # nothing to compute or keep
        lines.append("    pass")
    return lines


def _distinct_outputs(closed, outvars):
    """A body computing each distinct variable of `outvars` once (inputs and literals among
    them are not routed through it), and per entry of `outvars` its source: ("out", k) for
    the k-th result, ("in", k) for the k-th input, ("lit", literal)."""
    j = closed.jaxpr
    position = {v: k for k, v in enumerate(j.invars)}
    computed, sources = [], []
    for v in outvars:
        if type(v) is Literal:
            sources.append(("lit", v))
        elif v in position:
            sources.append(("in", position[v]))
        else:
            if v not in computed:
                computed.append(v)
            sources.append(("out", computed.index(v)))
    if computed == list(j.outvars):
        return closed, sources
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, computed, j.eqns), closed.consts), sources


higher_order_rules[cond_p] = _cond_rule
higher_order_rules[while_p] = _while_rule
higher_order_rules[scan_p] = _scan_rule
