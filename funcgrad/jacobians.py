"""Dense Jacobians and Hessians: `jacfwd`, `jacrev`, `hessian`, with JAX's output layout.

`jacfwd` traces the function once (define-by-run, as grad does) and pushes an identity basis
of tangents through it under `vmap`, one input leaf at a time; `jacrev` linearizes once and
pulls an identity basis of cotangents back under `vmap`, one output leaf at a time. Each block
is reshaped to `output shape + input shape`; the result is a pytree (the output's structure)
of pytrees (the differentiated arguments' structure).
Imports the AD interpreter, `batching_api` and lax; nothing from the user layer.
"""

import functools

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.api import (
    _argnums_tuple,
    _check_output_dtype,
    _flat_fun,
    _lower_aux,
    array_leaf,
)
from funcgrad.batching_api import vmap_flat
from funcgrad.core import Array, get_aval
from funcgrad.interpreters import ad
from funcgrad.tree_util import keystr, tree_flatten_with_path, tree_unflatten

__all__ = ["hessian", "jacfwd", "jacobian", "jacrev"]


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian of `fun` by forward mode (efficient for few inputs, many outputs).

    Args:
        fun: a function of positional pytree arguments returning a pytree of arrays.
        argnums: an int or a tuple of ints: the arguments to differentiate.
        has_aux: `fun` returns `(output, aux)`; the result is then `(jacobian, aux)`.
        holomorphic: the inputs and outputs are complex and `fun` is holomorphic: the
            result is the complex Jacobian (JAX's `holomorphic=True`).

    Returns:
        A function returning the Jacobian: for each output leaf of shape `S`, and each input
        leaf of shape `T`, an array of shape `S + T`, arranged as the output's pytree of the
        inputs' pytree (a tuple of argument trees when `argnums` is a tuple).

    Raises:
        FuncgradTypeError: if a differentiated input is not real floating point (complex
            with `holomorphic=True`, which also requires complex outputs).

    Example:
        >>> jacfwd(lambda x: x * x)(fnp.arange(2.0))
        Array([[0., 0.],
               [0., 2.]], dtype=float32)
    """
    @functools.wraps(fun)
    def jac(*args, **kwargs):
        leaves, in_tree, flat, store, nums = _prepare(fun, args, kwargs, argnums, has_aux,
                                                      "jacfwd")
        _check_dtypes(leaves, in_tree, nums, "jacfwd", "inputs", holomorphic)
        jaxpr, known, outs = ad.trace_known(flat, leaves, "jacfwd")
        if holomorphic:
            _check_dtypes(outs, store["tree"], None, "jacfwd", "outputs", holomorphic)
        primals = [known[v] for v in jaxpr.invars]
        blocks = []  # blocks[i][j]: d out_j / d in_i
        for i, x in enumerate(leaves):
            aval = get_aval(x)
            basis = _basis(aval)

            def push(t, i=i):
                ts = [t if k == i else ad.Zero(get_aval(p)) for k, p in enumerate(primals)]
                _, t_outs = ad.jvp_replay(jaxpr, known, outs, ts)
                return [ad.instantiate(o) for o in t_outs]
            cols, dims = vmap_flat(push, [basis], [0], aval.size, "jacfwd")
            blocks.append([_block(c, d, get_aval(o).shape, aval.shape, in_first=False)
                           for c, d, o in zip(cols, dims, outs)])
        jac_tree = _assemble(blocks, store["tree"], in_tree, isinstance(argnums, int), len(outs))
        return (jac_tree, _lower_aux(store["aux"])) if has_aux else jac_tree
    return jac


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of `fun` by reverse mode (efficient for many inputs, few outputs).

    Same arguments and output layout as `jacfwd`. Complex inputs are allowed (real
    outputs give JAX's conjugate-style rows, as `grad`); complex outputs need
    `holomorphic=True`. With `allow_int=True`, integer and bool inputs are allowed: their
    blocks are zeros of the input's dtype (as in JAX).

    Raises:
        FuncgradTypeError: if a differentiated input is not floating point or complex, or an
            output is not real floating point (complex with `holomorphic=True`).

    Example:
        >>> jacrev(lambda x: x * x)(fnp.arange(2.0))
        Array([[0., 0.],
               [0., 2.]], dtype=float32)
    """
    @functools.wraps(fun)
    def jac(*args, **kwargs):
        leaves, in_tree, flat, store, nums = _prepare(fun, args, kwargs, argnums, has_aux,
                                                      "jacrev")
        _check_dtypes(leaves, in_tree, nums, "jacrev", "inputs", holomorphic, allow_int)
        outs, lin = ad.linearize_flat(flat, leaves)
        _check_dtypes(outs, store["tree"], None, "jacrev", "outputs", holomorphic)
        in_avals = [get_aval(x) for x in leaves]
        blocks = [[None] * len(outs) for _ in leaves]
        for j, o in enumerate(outs):
            aval = get_aval(o)

            def pull(ct, j=j):
                cts = [ct if k == j else ad.Zero(get_aval(p)) for k, p in enumerate(outs)]
                got = lin.transpose(cts)
                return [ad.instantiate(ad.Zero(a) if g is None else g)
                        for g, a in zip(got, in_avals)]
            rows, dims = vmap_flat(pull, [_basis(aval)], [0], aval.size, "jacrev")
            for i, (r, d) in enumerate(zip(rows, dims)):
                blocks[i][j] = _block(r, d, aval.shape, in_avals[i].shape, in_first=True)
        jac_tree = _assemble(blocks, store["tree"], in_tree, isinstance(argnums, int), len(outs))
        return (jac_tree, _lower_aux(store["aux"])) if has_aux else jac_tree
    return jac


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Hessian of a scalar function: `jacfwd(jacrev(fun))`, with the same layout rules.

    Example:
        >>> hessian(lambda x: (x ** 3).sum())(fnp.array([1.0, 2.0]))
        Array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


jacobian = jacrev  # JAX's alias: `jax.jacobian is jax.jacrev` (allow_int included)


# --- helpers -----------------------------------------------------------------------------------

def _prepare(fun, args, kwargs, argnums, has_aux, name):
    nums = _argnums_tuple(argnums, len(args), name)
    dyn = tuple(args[n] for n in nums)
    pairs, in_tree = tree_flatten_with_path(dyn)
    leaves = [array_leaf(name, x, f"argument {nums[p[0].idx]}{keystr(p[1:])}")
              for p, x in pairs]
    store = {}

    def partial(*diff):
        full = list(args)
        for n, d in zip(nums, diff):
            full[n] = d
        return fun(*full, **kwargs)
    return leaves, in_tree, _flat_fun(partial, in_tree, store, has_aux), store, nums


def _dtype_problem(name, what, aval, holomorphic, where):
    """JAX's dtype rules of jacfwd/jacrev: an error text for a bad leaf, or None."""
    kind, got = dtypes.kind(aval.dtype), f"but {where} has type {aval.str_short()}"
    if what == "outputs" and name == "jacrev":
        return _check_output_dtype(name, aval, holomorphic, where)
    if holomorphic and kind != "c":
        return f"{name} with holomorphic=True requires {what} with complex dtype, {got}"
    if what == "inputs" and not holomorphic and kind not in ("fc" if name == "jacrev" else "f"):
        return (f"{name} requires real-valued inputs (a floating-point dtype"
                + (" or complex)" if name == "jacrev" else "; complex inputs need "
                   "holomorphic=True, or jvp for a non-holomorphic function)") + f", {got}")
    return None


def _check_dtypes(leaves, tree, nums, name, what, holomorphic, allow_int=False):
    paths = [p for p, _ in tree_flatten_with_path(tree_unflatten(tree, leaves))[0]]
    for x, path in zip(leaves, paths):
        if allow_int and dtypes.kind(get_aval(x).dtype) in "biu":
            continue
        where = (f"argument {nums[path[0].idx]}{keystr(path[1:])}" if what == "inputs"
                 else f"output{keystr(path)}")
        bad = _dtype_problem(name, what, get_aval(x), holomorphic, where)
        if bad:
            raise errors.FuncgradTypeError(
                f"{bad}.\n{errors.where()}\n  hint: convert it with .astype(...)"
                + (", or choose other arguments with argnums." if what == "inputs" else "."))


def _basis(aval):
    """The identity basis for a leaf: shape (size,) + leaf shape."""
    return Array(np.eye(aval.size, dtype=aval.dtype).reshape((aval.size,) + aval.shape))


def _block(x, d, out_shape, in_shape, in_first):
    """One Jacobian block reshaped to out_shape + in_shape from the vmapped result."""
    from funcgrad import lax
    from funcgrad.batching_api import move_to
    n = int(np.prod(in_shape if not in_first else out_shape, dtype=np.int64))
    x = move_to(x, d, 0, n)
    if in_first:  # (out size, *in_shape) from rows of a reverse pass
        return lax.reshape(x, tuple(out_shape) + tuple(in_shape))
    # (in size, *out_shape) from columns of a forward pass: bring the input axis last
    nd = len(out_shape)
    x = lax.transpose(x, tuple(range(1, nd + 1)) + (0,))
    return lax.reshape(x, tuple(out_shape) + tuple(in_shape))


def _assemble(blocks, out_tree, in_tree, single, n_out):
    """The output-tree of input-trees from blocks[i][j] (input leaf i, output leaf j)."""
    per_out = []
    for j in range(n_out):
        inner = tree_unflatten(in_tree, [blocks[i][j] for i in range(len(blocks))])
        per_out.append(inner[0] if single else inner)
    return tree_unflatten(out_tree, per_out)
