"""`funcgrad.ad_checkpoint`, JAX's `jax.ad_checkpoint`: `checkpoint` (`remat`), its policies,
`checkpoint_name`, and `print_saved_residuals` / `saved_residuals`, which list what the
backward pass of a function keeps from its forward pass.

`checkpoint` and the policies live in `funcgrad.checkpoint`; this module adds the residual
report, read from the traced program of `vjp` (whose function is a pytree of its residuals).
"""

import inspect

from funcgrad import errors
from funcgrad.api import make_jaxpr, vjp
from funcgrad.checkpoint import (
    Offloadable,
    Recompute,
    Saveable,
    checkpoint,
    checkpoint_name,
    checkpoint_policies,
    name_p,
    remat,
)
from funcgrad.core import Literal
from funcgrad.tree_util import keystr, tree_flatten_with_path, tree_leaves, tree_unflatten

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name",
           "checkpoint_policies", "print_saved_residuals", "remat", "saved_residuals"]


def saved_residuals(f, *args, **kwargs):
    """What reverse mode keeps of `f(*args, **kwargs)` for its backward pass: a list of
    `(ShapedArray, description)`, one per residual value, saying where it comes from (an
    argument, a constant, a named value or the output of an operation and its line).

    Example:
        >>> [str(d) for _, d in saved_residuals(lambda x: fnp.sin(x).sum(), fnp.ones(3))]
        ['from the argument x']
    """
    pairs, in_tree = tree_flatten_with_path((args, kwargs))
    store = {}

    def traced(*leaves):
        a, kw = tree_unflatten(in_tree, list(leaves))
        out, pullback = vjp(lambda *a: f(*a, **kw), *a)
        store["n"] = len(tree_leaves(pullback))
        return out, pullback
    closed = make_jaxpr(traced)(*[x for _, x in pairs])
    jaxpr = closed.jaxpr
    residuals = jaxpr.outvars[len(jaxpr.outvars) - store["n"]:]
    producer = {v: e for e in jaxpr.eqns for v in e.outvars}
    inputs = dict(zip(jaxpr.invars, _arg_names(f, pairs)))
    consts = set(jaxpr.constvars)
    return [(r.aval, _describe(r, inputs, consts, producer)) for r in residuals]


def _describe(v, inputs, consts, producer):
    if type(v) is Literal:
        return "from a literal"
    if v in consts:
        return "from a constant"
    if v in inputs:
        return f"from the argument {inputs[v]}"
    eqn = producer[v]
    where = errors.format_frame(eqn.source)
    if eqn.prim is name_p:
        return f"named '{eqn.params['name']}' from {where}"
    if eqn.prim.name == "jit":
        return f"output of jitted function '{eqn.params['name']}' from {where}"
    return f"output of {eqn.prim.name} from {where}"


def _arg_names(f, pairs):
    """A name per argument leaf: `x`, `params['w']`, `args[2]`, `kwargs['k']`."""
    try:
        params = [p for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in pairs:
        head, pos, rest = path[0].idx, path[1], keystr(path[2:])
        if head == 1:
            names.append(f"{pos.key}{rest}")
        else:
            label = params[pos.idx].name if pos.idx < len(params) else f"args[{pos.idx}]"
            names.append(f"{label}{rest}")
    return names


def print_saved_residuals(f, *args, **kwargs):
    """Print `saved_residuals(f, *args, **kwargs)`, one residual per line.

    Example:
        >>> print_saved_residuals(lambda x: fnp.sin(x).sum(), fnp.ones(3))
        f32[3] from the argument x
    """
    for aval, source in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {source}")
