"""The function `vjp` returns, as a pytree (JAX's `Partial` of a pullback and its residuals).

`vjp(f, x)` returns `Partial(Pullback(...), Residuals(lin))`: the pullback (static: the
pytree structures and types of the inputs and outputs) applied to the residuals of the
linearization `lin` (an `ad.Linearized`). The residuals are the pytree's leaves: the values
the linear program reads. So a vjp function can be returned from `jit` or `make_jaxpr`
(its residuals become outputs), passed into `jit`, and counted (`print_saved_residuals`).
Flattening keeps only the linear part of the program and the values it reads; nothing is
computed until the function is flattened. Imports the core, the interpreters and tree_util.
"""

from funcgrad import errors
from funcgrad.core import Jaxpr, Var, get_aval
from funcgrad.interpreters import ad
from funcgrad.tree_util import Partial, register_pytree_node, tree_unflatten

__all__ = ["Pullback", "Residuals", "vjp_function"]


class Residuals:
    """The residual values of a linearization (a pytree node; its leaves are the values)."""

    __slots__ = ("lin", "_flat")

    def __init__(self, lin, flat=None):
        self.lin, self._flat = lin, flat

    def flatten(self):
        """(residual values, the linear program reading them as constants), computed once
        (the same static part each time: `jit` finds its trace again)."""
        if self._flat is None:
            self._flat = self._lean()
        return self._flat

    def _lean(self):
        lin, known = self.lin, self.lin.known
        eqns = [e for e in lin.jaxpr.eqns if e.outvars and e.outvars[0] not in known]
        used = dict.fromkeys(a for e in eqns for a in e.invars if type(a) is Var and a in known)
        used.update(dict.fromkeys(v for v in lin.jaxpr.outvars if type(v) is Var and v in known))
        jaxpr = Jaxpr(list(used), lin.jaxpr.invars, lin.jaxpr.outvars, eqns)
        return [known[v] for v in used], _Linear(jaxpr, lin)


class _Linear:
    """The static part of flattened residuals: the linear program without its known part."""

    def __init__(self, jaxpr, lin):
        self.jaxpr, self.in_vars = jaxpr, lin.in_vars
        self.out_nonzero, self.out_avals = lin.out_nonzero, lin.out_avals

    def rebuild(self, values):
        known = dict(zip(self.jaxpr.constvars, values))
        lin = ad.Linearized(self.jaxpr, known, self.in_vars, self.out_nonzero, self.out_avals)
        return Residuals(lin, (list(values), self))


register_pytree_node(Residuals, Residuals.flatten, lambda lin, values: lin.rebuild(values))


class Pullback:
    """`pullback(residuals, ct)`: the cotangents of a vjp's inputs (one entry per primal)."""

    def __init__(self, name, in_tree, out_tree, in_avals, out_avals, ct_dtype):
        self.name, self.in_tree, self.out_tree = name, in_tree, out_tree
        self.in_avals, self.out_avals, self.ct_dtype = in_avals, out_avals, ct_dtype

    def __repr__(self):
        return f"<vjp pullback of {self.name}>"

    def __call__(self, residuals, ct):
        from funcgrad.api import array_leaves
        ct_leaves, ct_tree = array_leaves("vjp function", ct, "cotangent")
        if ct_tree != self.out_tree:
            raise errors.FuncgradTypeError(
                f"vjp function: the cotangent has structure {ct_tree} but the function's "
                f"output has structure {self.out_tree}\n{errors.where()}")
        for i, (c, a) in enumerate(zip(ct_leaves, self.out_avals)):
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise errors.FuncgradTypeError(
                    f"vjp function: cotangent leaf {i} has shape {ca.shape} but the output "
                    f"has shape {a.shape} ({a})\n{errors.where()}")
        cts = residuals.lin.transpose([self.ct_dtype(i, c, a) for i, (c, a) in
                                       enumerate(zip(ct_leaves, self.out_avals))])
        cts = [ad.instantiate(c) if c is not None else ad.instantiate(ad.Zero(a))
               for c, a in zip(cts, self.in_avals)]
        return tuple(tree_unflatten(self.in_tree, cts))


def vjp_function(fun, lin, in_tree, out_tree, in_avals, out_avals, ct_dtype):
    """The function `vjp` returns: `Partial(Pullback(...), Residuals(lin))`."""
    name = getattr(fun, "__name__", type(fun).__name__)
    return Partial(Pullback(name, in_tree, out_tree, in_avals, out_avals, ct_dtype),
                   Residuals(lin))
