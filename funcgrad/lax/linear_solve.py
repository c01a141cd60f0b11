"""`custom_linear_solve` and `custom_root`: solves whose derivatives come from the equation
they solve (implicit differentiation), not from the solver's operations, as JAX's.

`custom_linear_solve(matvec, b, solve, transpose_solve)` binds `linear_solve_p`, whose
operands are the values its four programs close over (matvec, its transpose vecmat, solve,
transpose_solve; each group first) and then the leaves of `b`. Evaluated, it is a call of
the solve program (`jaxpr`; the compiler inlines it). Its jvp solves again for
db - dA x (dA x: the tangent of matvec in its closed-over values); that tangent solve is
linear in its right-hand side and transposes to a solve with transpose_solve and vecmat
(JAX's rule: reverse mode needs `transpose_solve`, or `symmetric=True`). `custom_root`
binds `root_p` (programs f, solve and the tangent solve of f linearized at a point): its
tangent is -tangent_solve(∂f/∂x, ∂f/∂θ dθ) at the root, computed with ordinary operations,
so it transposes through `tangent_solve`. The solvers run undifferentiated, so they may use
`while_loop`. Under vmap every operand gets the batch axis (broadcast if it had none) and the
programs are batched. Imports the core, the interpreters and lax.
"""

from funcgrad import errors
from funcgrad.core import ClosedJaxpr, Jaxpr, Primitive, Var, eval_jaxpr, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.interpreters import partial_eval as pe
from funcgrad.lax.control_flow.common import as_operand, eval_eagerly
from funcgrad.lax.elementwise import neg
from funcgrad.lax.shape import broadcast_in_dim
from funcgrad.tree_util import tree_flatten, tree_unflatten

__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p"]


# --- tracing the user's functions ---------------------------------------------------------------

def _flat(fun, tree, avals, name, aux, store=None):
    store = {} if store is None else store
    """`fun` (pytree -> pytree like the input, or `(pytree, aux)`) as a flat function,
    checking the structure and the shapes of its result (the aux structure goes to
    `store["aux"]`)."""
    def flat(*leaves):
        out = fun(tree_unflatten(tree, list(leaves)))
        extra = []
        if aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise errors.FuncgradTypeError(f"{name} must return a pair (solution, aux) "
                                               f"with has_aux=True\n{errors.where()}")
            out, (extra, store["aux"]) = out[0], tree_flatten(out[1])
        got, got_tree = tree_flatten(out)
        got = [as_operand(g) for g in got]
        if got_tree != tree:
            raise errors.FuncgradTypeError(f"{name}() output pytree structure must match the "
                                           f"input's, got {got_tree} and {tree}\n"
                                           f"{errors.where()}")
        shapes = [tuple(get_aval(g).shape) for g in got]
        if shapes != [tuple(a.shape) for a in avals]:
            raise errors.FuncgradValueError(f"{name}() output shapes must match the input's, "
                                            f"got {shapes} and "
                                            f"{[tuple(a.shape) for a in avals]}\n"
                                            f"{errors.where()}")
        return got + [as_operand(e) for e in extra]
    return flat


def _program(flat, avals, name):
    return pe.closure_convert(flat, list(avals), name)


def _run(program, consts, leaves):
    """Evaluate a const-free program on (consts, leaves) in the current trace."""
    return list(eval_jaxpr(program.jaxpr, [], *consts, *leaves))


def _body(programs, lengths, which):
    """A program of all the operands (every group of consts, then the right-hand side)
    computing `programs[which]`: the call the primitive's evaluation is."""
    p = programs[which]
    n = lengths[which]
    invars = []
    for i, k in enumerate(lengths):
        if i == which:
            invars += list(p.jaxpr.invars[:n])
        else:
            avals = programs[i].in_avals[:k] if programs[i] is not None else []
            invars += [Var(a) for a in avals]
    invars += list(p.jaxpr.invars[n:])
    return ClosedJaxpr(Jaxpr([], invars, list(p.jaxpr.outvars), list(p.jaxpr.eqns)), [])


def _groups(args, lengths):
    out, i = [], 0
    for k in lengths:
        out.append(list(args[i:i + k]))
        i += k
    return out, list(args[i:])


def _zeros(avals):
    return [ad.Zero(a) for a in avals]


def _matvec_tangent(program, consts, dconsts, x):
    """dA x: the tangent of the linear map `program(consts, x)` in its consts."""
    if all(type(t) is ad.Zero for t in dconsts):
        return None
    _, t = ad.jvp_eval(program.jaxpr, [], list(consts) + list(x),
                       list(dconsts) + _zeros([get_aval(v) for v in x]))
    return t


def _batch_all(args, dims):
    """Every operand with the batch axis first (broadcast where it had none)."""
    size = next(get_aval(a).shape[d] for a, d in zip(args, dims)
                if d is not batching.not_mapped)
    out = []
    for a, d in zip(args, dims):
        if d is batching.not_mapped:
            shape = tuple(get_aval(a).shape)
            out.append(broadcast_in_dim(a, (size,) + shape, tuple(range(1, len(shape) + 1))))
        else:
            out.append(batching.moveaxis(a, d, 0))
    return out, size


def _batch_programs(programs, lengths, groups, size):
    """The programs batched along every input; new consts (their own first) per group."""
    new_programs, new_groups = [], []
    for p, consts in zip(programs, groups):
        if p is None:
            new_programs.append(None)
            new_groups.append(consts)
            continue
        bp, _ = batching.batch_jaxpr(p, [0] * len(p.in_avals), size, True)
        bp, extra = pe.closure_convert(bp)
        new_programs.append(bp)
        new_groups.append(list(extra) + list(consts))
    return tuple(new_programs), new_groups


# --- custom_linear_solve --------------------------------------------------------------------------

def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """The solution x of matvec(x) = b computed by `solve(matvec, b)`, differentiated
    implicitly: tangents solve matvec(dx) = db - dmatvec(x) with `solve`, cotangents use
    `transpose_solve(vecmat, ct)` (vecmat: matvec's transpose, derived automatically;
    `symmetric=True` uses `solve` and matvec). `solve` itself is never differentiated (it may
    use `while_loop`). With `has_aux`, the solvers return `(x, aux)` and so does this.

    Example:
        >>> a = fnp.array([[2.0, 1.0], [1.0, 3.0]])
        >>> custom_linear_solve(lambda x: a @ x, fnp.array([3.0, 5.0]),
        ...                     lambda mv, b: fnp.linalg.solve(a, b), symmetric=True)
        Array([0.8, 1.4], dtype=float32)
    """
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    leaves, tree = tree_flatten(b)
    leaves = [as_operand(x) for x in leaves]
    avals = [get_aval(x).update(weak_type=False) for x in leaves]
    mv, mv_c = _program(_flat(matvec, tree, avals, "matvec", False), avals, "matvec")
    store = {}
    s, s_c = _program(_flat(lambda x: solve(matvec, x), tree, avals, "solve", has_aux,
                            store), avals, "solve")
    vm, vm_c, ts, ts_c = None, [], None, []
    if transpose_solve is not None:
        if symmetric:
            vm, vm_c = mv, list(mv_c)
        else:
            t = ad.transpose_jaxpr(mv, [False] * len(mv_c) + [True] * len(avals))
            vm, extra = pe.closure_convert(t)
            vm_c = list(extra) + list(mv_c)

        def vecmat(y, vm=vm, vm_c=vm_c):
            ys = [as_operand(v) for v in tree_flatten(y)[0]]
            return tree_unflatten(tree, _run(vm, vm_c, ys))
        ts, ts_c = _program(_flat(lambda x: transpose_solve(vecmat, x), tree, avals,
                                  "transpose_solve", has_aux), avals, "transpose_solve")
    programs = (mv, vm, s, ts)
    lengths = (len(mv_c), len(vm_c), len(s_c), len(ts_c))
    outs = linear_solve_p.bind(*mv_c, *vm_c, *s_c, *ts_c, *leaves,
                               jaxpr=_body(programs, lengths, 2), programs=programs,
                               lengths=lengths)
    x = tree_unflatten(tree, outs[:len(leaves)])
    return (x, tree_unflatten(store["aux"], outs[len(leaves):])) if has_aux else x


def _linear_solve_jvp(primals, outs, tangents, *, jaxpr, programs, lengths):
    groups, b = _groups(primals, lengths)
    dgroups, db = _groups(tangents, lengths)
    x = outs[:len(b)]
    t = _matvec_tangent(programs[0], groups[0], dgroups[0], x)
    rhs = db if t is None else [ad.add_tangents(d, neg(v) if type(v) is not ad.Zero else v)
                                for d, v in zip(db, t)]
    if all(type(r) is ad.Zero for r in rhs):
        return _zeros([get_aval(o) for o in outs])
    dx = linear_solve_p.bind(*[c for g in groups for c in g],
                             *[ad.instantiate(r) for r in rhs], jaxpr=jaxpr,
                             programs=programs, lengths=lengths)
    return list(dx[:len(b)]) + _zeros([get_aval(o) for o in outs[len(b):]])


def _linear_solve_transpose(cts, *args, jaxpr, programs, lengths):
    if programs[3] is None:
        raise errors.FuncgradTypeError("transpose_solve required for backwards mode "
                                       "automatic differentiation of custom_linear_solve "
                                       f"(or symmetric=True)\n{errors.where()}")
    groups, b = _groups(args, lengths)
    if any(ad.is_undefined(c) for g in groups for c in g):
        raise errors.FuncgradTypeError("custom_linear_solve: the values matvec and the "
                                       "solvers close over must be known when transposing "
                                       f"(only b is linear)\n{errors.where()}")
    order = (1, 0, 3, 2)
    t_programs = tuple(programs[i] for i in order)
    t_lengths = tuple(lengths[i] for i in order)
    ct_x = [ad.instantiate(c) for c in cts[:len(b)]]
    out = linear_solve_p.bind(*[c for i in order for c in groups[i]], *ct_x,
                              jaxpr=_body(t_programs, t_lengths, 2), programs=t_programs,
                              lengths=t_lengths)
    return [None] * sum(lengths) + list(out[:len(b)])


def _linear_solve_batch(args, dims, *, jaxpr, programs, lengths):
    args, size = _batch_all(args, dims)
    groups, b = _groups(args, lengths)
    new_programs, new_groups = _batch_programs(programs, lengths, groups, size)
    new_lengths = tuple(len(g) for g in new_groups)
    outs = linear_solve_p.bind(*[c for g in new_groups for c in g], *b,
                               jaxpr=_body(new_programs, new_lengths, 2),
                               programs=new_programs, lengths=new_lengths)
    return outs, [0] * len(outs)


linear_solve_p = Primitive("custom_linear_solve", multiple_results=True)
linear_solve_p.calls_body = True  # evaluated (and compiled) as a call of the solve program
linear_solve_p.def_impl(lambda *args, jaxpr, **_: eval_eagerly(jaxpr, args), raw=False)
linear_solve_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
ad.jvp_rules[linear_solve_p] = _linear_solve_jvp
ad.transpose_rules[linear_solve_p] = _linear_solve_transpose
batching.batch_rules[linear_solve_p] = _linear_solve_batch


# --- custom_root ----------------------------------------------------------------------------------

def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """`solve(f, initial_guess)`, a root of f, differentiated by the implicit function theorem
    in the values f closes over: dx = -tangent_solve(g, ∂f/∂θ dθ) with g the linear map f
    linearized at the root in x (`tangent_solve(g, y)` returns the x with g(x) = y, e.g.
    `lambda g, y: y / g(1.0)` for scalars). `solve` is never differentiated. With `has_aux`,
    `solve` returns `(root, aux)` and so does this (aux carries no derivative).

    Example:
        >>> def newton(f, x0):
        ...     return lax.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x0)
        >>> def sqrt(a):
        ...     return lax.custom_root(lambda x: x * x - a, 1.0, newton, lambda g, y: y / g(1.0))
        >>> funcgrad.grad(sqrt)(4.0)
        Array(0.25, dtype=float32)
    """
    leaves, tree = tree_flatten(initial_guess)
    leaves = [as_operand(x) for x in leaves]
    avals = [get_aval(x).update(weak_type=False) for x in leaves]
    fp, f_c = _program(_flat(f, tree, avals, "f", False), avals, "f")
    store = {}
    sp, s_c = _program(_flat(lambda x: solve(f, x), tree, avals, "solve", has_aux, store),
                       avals, "solve")
    n = len(avals)

    def linearize_and_solve(*xs_and_ys):
        xs, ys = list(xs_and_ys[:n]), list(xs_and_ys[n:])

        def g(v):
            vs = [as_operand(u) for u in tree_flatten(v)[0]]
            _, t = ad.jvp_eval(fp.jaxpr, [], list(f_c) + xs, _zeros(fp.in_avals[:len(f_c)])
                               + vs)
            return tree_unflatten(tree, [ad.instantiate(u) for u in t])
        out = tangent_solve(g, tree_unflatten(tree, ys))
        got, got_tree = tree_flatten(out)
        if got_tree != tree:
            raise errors.FuncgradTypeError(f"tangent_solve() output pytree structure must "
                                           f"match the input's, got {got_tree} and {tree}\n"
                                           f"{errors.where()}")
        return [as_operand(v) for v in got]
    ls, ls_c = _program(linearize_and_solve, avals + avals, "tangent_solve")
    programs = (fp, sp, ls)
    lengths = (len(f_c), len(s_c), len(ls_c))
    outs = root_p.bind(*f_c, *s_c, *ls_c, *leaves, jaxpr=_body(programs, lengths, 1),
                       programs=programs, lengths=lengths)
    x = tree_unflatten(tree, outs[:n])
    return (x, tree_unflatten(store["aux"], outs[n:])) if has_aux else x


def _root_jvp(primals, outs, tangents, *, jaxpr, programs, lengths):
    groups, guess = _groups(primals, lengths)
    dgroups, _ = _groups(tangents, lengths)
    x = list(outs[:len(guess)])
    rhs = _matvec_tangent(programs[0], groups[0], dgroups[0], x)
    if rhs is None or all(type(r) is ad.Zero for r in rhs):
        return _zeros([get_aval(o) for o in outs])
    dx = _run(programs[2], groups[2], x + [ad.instantiate(r) for r in rhs])
    return [neg(d) for d in dx] + _zeros([get_aval(o) for o in outs[len(guess):]])


def _root_batch(args, dims, *, jaxpr, programs, lengths):
    args, size = _batch_all(args, dims)
    groups, guess = _groups(args, lengths)
    new_programs, new_groups = _batch_programs(programs, lengths, groups, size)
    new_lengths = tuple(len(g) for g in new_groups)
    outs = root_p.bind(*[c for g in new_groups for c in g], *guess,
                       jaxpr=_body(new_programs, new_lengths, 1), programs=new_programs,
                       lengths=new_lengths)
    return outs, [0] * len(outs)


root_p = Primitive("custom_root", multiple_results=True)
root_p.calls_body = True  # evaluated (and compiled) as a call of the solve program
root_p.def_impl(lambda *args, jaxpr, **_: eval_eagerly(jaxpr, args), raw=False)
root_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
ad.jvp_rules[root_p] = _root_jvp
batching.batch_rules[root_p] = _root_batch
