"""`ReduceOp`: what a fused reduction is, declared once with its primitive
(`Primitive.declare(..., reduce_op=ReduceOp(...))`); every backend's reduction tables are
derived from it. Imports nothing of funcgrad.
"""


class ReduceOp:
    """What every backend needs to compute a fused reduction, declared once beside its
    primitive (`p.declare("reduction", fusible=True, reduce_op=ReduceOp(...))`); the backends'
    tables (numpy's reduce calls, the chunked loops' partial results, the C dialects'
    accumulators and OpenMP clauses, CUDA's warp folds) are derived from it, and the coverage
    test checks it on every fusing backend.

    - `name`: the op a kernel names (`KernelOutput.reduce`), unique ("sum", "prod");
    - `combine`: the fusible elementwise primitive folding two values (`add_p`): a C backend
      prints it with its own expression for that primitive;
    - `ufunc`: numpy's binary ufunc of the same op (`np.add`): `ufunc.reduce` reduces, and
      the ufunc folds partial results;
    - `identity(dtype)`: the value a fold starts from (a Python scalar);
    - `accumulate(dtype)`: the dtype name it accumulates in (at least: a backend may widen);
    - `openmp`: the operator an OpenMP `reduction(...)` clause names it by ("+", "max"), so
      SIMD lanes may fold partial results, or None (the fold stays in order);
    - `selects`: its result is one of its operands (max, min): exact in any order but for
      the sign of zero, which follows numpy's fold (`combine` then takes the value dtype);
    - `pairwise`: each fold rounds and numpy folds it pairwise (sums): a backend accumulates
      it pairwise, compensated or in a wider type, to be at least as accurate.

    Example:
        >>> ReduceOp.named("sum").ufunc
        <ufunc 'add'>
    """

    _named = {}  # name -> the ReduceOp of that name

    def __init__(self, name, combine, ufunc, identity, accumulate, openmp=None,
                 selects=False, pairwise=False):
        other = ReduceOp._named.get(name)
        if other is not None:
            raise ValueError(f"a reduction op named {name!r} exists already; kernels name "
                             "their reductions by op name")
        self.name, self.combine, self.ufunc = name, combine, ufunc
        self.identity, self.accumulate = identity, accumulate
        self.openmp, self.selects, self.pairwise = openmp, bool(selects), bool(pairwise)
        ReduceOp._named[name] = self

    def __repr__(self):
        return f"ReduceOp({self.name})"

    @staticmethod
    def named(name):
        """The op a kernel reduction names (`KernelOutput.reduce`)."""
        return ReduceOp._named[name]

    @staticmethod
    def all():
        """Every declared reduction op, by name."""
        return [op for _, op in sorted(ReduceOp._named.items())]
