"""Muon (Jordan et al. 2024): momentum orthogonalized by Newton-Schulz iterations for the
matrix-shaped parameters, AdamW for the others; as optax 0.2.8's `optax.contrib.muon`.

`MuonDimensionNumbers` says which axes of a parameter are its input (reduction) and output
axes; the others are batch axes, each slice orthogonalized on its own (`vmap`). Imports
`funcgrad.numpy`, `funcgrad.lax`, `funcgrad.batching_api` and the optim modules it chains.
"""

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.batching_api import vmap
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import tree_utils as tu
from funcgrad.optim.aliases import adamw
from funcgrad.optim.base import GradientTransformation, MaskedNode, chain, init_empty_state
from funcgrad.optim.combining import partition
from funcgrad.optim.numerics import safe_increment
from funcgrad.optim.transforms import add_decayed_weights, scale_by_learning_rate
from funcgrad.tree_util import tree_map

__all__ = ["MuonDimensionNumbers", "MuonState", "muon", "scale_by_muon"]

_PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
_DEFAULT_NS_COEFFS = (3.4445, -4.7750, 2.0315)
_NS_COEFFS_PRESETS = {
    "standard": _DEFAULT_NS_COEFFS,
    "dion": [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
             (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)],
}


class MuonDimensionNumbers(NamedTuple):
    """The input (`reduction_axis`) and output axes of a weight; the rest are batch axes."""

    reduction_axis: Sequence[int] | int = 0
    output_axis: Sequence[int] | int = 1


def _is_dim_nums(x):
    return isinstance(x, MuonDimensionNumbers)


def _axes(x, dim_nums):
    def norm(axes):
        return tuple(a % x.ndim for a in ((axes,) if isinstance(axes, int) else axes))
    return norm(dim_nums.reduction_axis), norm(dim_nums.output_axis)


def _muon_reshape(x, dim_nums):
    """`(to [batch, fan_in, fan_out], back)` for a weight and its dimension numbers."""
    if x.ndim < 2:
        raise FuncgradValueError(f"muon: parameters it orthogonalizes need rank >= 2, got "
                                 f"shape {tuple(x.shape)}")
    reduction, output = _axes(x, dim_nums)
    if set(reduction) & set(output):
        raise FuncgradValueError(f"muon: reduction axes {reduction} and output axes {output} "
                                 f"must be disjoint (shape {tuple(x.shape)})")
    batch = tuple(sorted(set(range(x.ndim)) - set(reduction) - set(output)))
    perm = batch + reduction + output
    inverse = tuple(sorted(range(x.ndim), key=lambda i: perm[i]))
    sizes = [tuple(x.shape[a] for a in axes) for axes in (batch, reduction, output)]
    flat = tuple(math.prod(s) for s in sizes)
    return (lambda y: y.transpose(perm).reshape(flat),
            lambda y: y.reshape(sizes[0] + sizes[1] + sizes[2]).transpose(inverse))


def _ns_step(x, coeffs):
    a = x @ fnp.conj(x.T)
    b = coeffs[1] * a + coeffs[2] * a @ a
    return coeffs[0] * x + b @ x


def _ns_first_step(x, coeffs, preconditioning, eps=1e-8):
    """The first iteration of the AOL / Schatten preconditionings (which rescale x first)."""
    a = x @ fnp.conj(x.T) if preconditioning == "aol" else x @ x.T
    if preconditioning == "aol":
        s = fnp.expand_dims(lax.rsqrt(fnp.clip(fnp.sum(fnp.abs(a), axis=-1), min=eps)), -1)
        x, a = x * s, a * s * fnp.swapaxes(s, -1, -2)
    else:
        s = lax.rsqrt(fnp.clip(fnp.linalg.norm(a, ord="fro", axis=(-2, -1)), min=eps))
        x, a = x * s, a * s ** 2
    b = coeffs[1] * a + coeffs[2] * a @ a
    return coeffs[0] * x + b @ x


def _orthogonalize_matrix(x, ns_coeffs, ns_steps, preconditioning, eps):
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    if preconditioning == "frobenius":
        x = x / (fnp.linalg.norm(x, ord="fro") + eps)
    elif preconditioning == "spectral":
        x = x / (fnp.linalg.norm(x, ord=2) + eps)
    coeffs = ns_coeffs.astype(x.dtype)
    steps = [coeffs] * int(ns_steps) if coeffs.ndim == 1 else \
        [coeffs[i] for i in range(coeffs.shape[0])]
    for i, c in enumerate(steps):  # unrolled, as optax does (it composes well with vmap)
        rescale_first = i == 0 and preconditioning in ("aol", "schatten")
        x = _ns_first_step(x, c, preconditioning) if rescale_first else _ns_step(x, c)
    return x.T if transposed else x


def orthogonalize_via_newton_schulz(x, ns_coeffs, ns_steps=5, preconditioning="frobenius",
                                    eps=1e-8, dimension_numbers=None):
    """The nearest (semi-)orthogonal matrix to `x`, approximately, by Newton-Schulz steps."""
    if x.ndim != 2 and not _is_dim_nums(dimension_numbers):
        raise FuncgradValueError(f"muon: input must be a matrix or come with dimension "
                                 f"numbers, got shape {tuple(x.shape)}")
    if x.ndim == 2:
        dimension_numbers = MuonDimensionNumbers(0, 1)
    if ns_coeffs.ndim > 2 or ns_coeffs.shape[-1] != 3:
        raise FuncgradValueError(f"muon: Newton-Schulz coefficients must have shape (3,) or "
                                 f"(n, 3), got {tuple(ns_coeffs.shape)}")
    if preconditioning not in _PRECONDITIONINGS:
        raise FuncgradValueError(f"muon: unknown preconditioning {preconditioning!r}")
    to_flat, back = _muon_reshape(x, dimension_numbers)
    return back(vmap(lambda m: _orthogonalize_matrix(m, ns_coeffs, ns_steps, preconditioning,
                                                     eps))(to_flat(x)))


class MuonState(NamedTuple):
    count: Any  # int32
    mu: Any  # the momentum
    ns_coeffs: Any  # (3,) or (n, 3) Newton-Schulz coefficients


def _resolve(dim_nums, updates):
    return dim_nums(updates) if callable(dim_nums) else dim_nums


def scale_by_muon(ns_coeffs=_DEFAULT_NS_COEFFS, ns_steps=5, beta=0.95, eps=1e-8, mu_dtype=None,
                  *, nesterov: bool = True, adaptive: bool = False,
                  preconditioning: str = "frobenius",
                  weight_dimension_numbers=None) -> GradientTransformation:
    """Muon's scaling: the (Nesterov) momentum, orthogonalized by `ns_steps` Newton-Schulz
    iterations (`adaptive`: rescaled by `<momentum, orthogonalized>`).

    Example:
        >>> opt = chain(scale_by_muon(), scale(-0.02))     # for matrix parameters
    """
    def init(params):
        coeffs = fnp.asarray(ns_coeffs)
        if coeffs.ndim > 2 or coeffs.shape[-1] != 3:
            raise FuncgradValueError(f"scale_by_muon: ns_coeffs must have shape (3,) or "
                                     f"(n, 3), got {tuple(coeffs.shape)}")
        if coeffs.ndim == 2:
            if coeffs.shape[0] > ns_steps:
                raise FuncgradValueError(f"scale_by_muon: not enough coefficients for "
                                         f"{ns_steps} steps")
            coeffs = coeffs[-ns_steps:]
        return MuonState(fnp.zeros((), fnp.int32), tu.tree_zeros_like(params, dtype=mu_dtype),
                         coeffs)

    def update(updates, state, params=None):
        dim_nums = _resolve(weight_dimension_numbers, updates)
        mu = tu.tree_update_moment(updates, state.mu, beta, 1)
        count = safe_increment(state.count)
        if nesterov:
            mu_hat = tree_map(lambda m, g: beta * m + (1 - beta) * g,
                              tu.tree_bias_correction(mu, beta, safe_increment(count)),
                              tu.tree_bias_correction(updates, beta, count))
        else:
            mu_hat = tu.tree_bias_correction(mu, beta, count)
        updates = tree_map(lambda x, d: orthogonalize_via_newton_schulz(
            x, state.ns_coeffs, ns_steps, preconditioning, eps, d), mu_hat, dim_nums,
            is_leaf=_is_dim_nums)
        if adaptive:
            updates = tree_map(lambda x, y: fnp.sum(fnp.conj(x) * y) * y, mu_hat, updates)
        return updates, MuonState(count, tu.tree_cast(mu, mu_dtype), state.ns_coeffs)

    return GradientTransformation(init, update)


def _scale_by_shape(weight_dimension_numbers=None, consistent_rms=None) -> GradientTransformation:
    """Muon's width scaling: `sqrt(max(1, fan_out / fan_in))`, or with `consistent_rms`,
    `sqrt(max(fan_in, fan_out)) * consistent_rms`."""
    def scale_leaf(update, dim_nums):
        reduction, output = _axes(update, dim_nums)
        fan_in = math.prod(update.shape[a] for a in reduction)
        fan_out = math.prod(update.shape[a] for a in output)
        if consistent_rms is not None:
            return fnp.sqrt(fnp.maximum(fan_in, fan_out)) * consistent_rms * update
        return fnp.sqrt(fnp.maximum(1, fan_out / fan_in)) * update

    def update(updates, state, params=None):
        dim_nums = _resolve(weight_dimension_numbers, updates)
        return tree_map(scale_leaf, updates, dim_nums, is_leaf=_is_dim_nums), state

    return GradientTransformation(init_empty_state, update)


def muon(learning_rate, ns_coeffs=_DEFAULT_NS_COEFFS, ns_steps=5, beta=0.95, eps=1e-8,
         weight_decay=0.0, weight_decay_mask=None, mu_dtype=None, *, nesterov: bool = True,
         adaptive: bool = False, preconditioning: str = "frobenius", adam_b1=0.9,
         adam_b2=0.999, adam_eps_root=0.0, adam_weight_decay=0.0, adam_learning_rate=None,
         muon_weight_dimension_numbers=None, consistent_rms=None) -> GradientTransformation:
    """Muon for the matrix parameters (rank 2, or those given dimension numbers), AdamW for
    the others.

    Example:
        >>> opt = muon(learning_rate=0.02)
        >>> state = opt.init({'w': fnp.zeros((4, 3)), 'b': fnp.zeros(3)})
    """
    adam_learning_rate = learning_rate if adam_learning_rate is None else adam_learning_rate
    if isinstance(ns_coeffs, str):
        if ns_coeffs not in _NS_COEFFS_PRESETS:
            raise FuncgradValueError(f"muon: unknown ns_coeffs preset {ns_coeffs!r}")
        ns_coeffs = _NS_COEFFS_PRESETS[ns_coeffs]
    given = muon_weight_dimension_numbers

    def dim_nums_of(params):
        return MuonDimensionNumbers() if given is None else _resolve(given, params)

    def param_labels(params):
        if given is None:
            return tree_map(lambda x: "muon" if x.ndim == 2 else "adam", params)
        return tree_map(lambda d, x: tree_map(lambda _: "muon" if d is not None else "adam", x),
                        dim_nums_of(params), params,
                        is_leaf=lambda x: x is None or _is_dim_nums(x))

    def muon_dim_nums(params):
        mask = tree_map(lambda label: label == "muon", param_labels(params))
        return tree_map(lambda d, sub: tree_map(lambda m: d if m else MaskedNode(), sub),
                        dim_nums_of(params), mask,
                        is_leaf=lambda x: x is None or _is_dim_nums(x)
                        or isinstance(x, MaskedNode))

    muon_tx = chain(
        scale_by_muon(ns_coeffs, ns_steps, beta, eps, mu_dtype, nesterov=nesterov,
                      adaptive=adaptive, preconditioning=preconditioning,
                      weight_dimension_numbers=muon_dim_nums),
        _scale_by_shape(muon_dim_nums, consistent_rms),
        add_decayed_weights(weight_decay, weight_decay_mask),
        scale_by_learning_rate(learning_rate))
    adam_tx = adamw(adam_learning_rate, b1=adam_b1, b2=adam_b2, eps=eps, eps_root=adam_eps_root,
                    weight_decay=adam_weight_decay, mu_dtype=mu_dtype, nesterov=nesterov)
    return partition({"muon": muon_tx, "adam": adam_tx}, param_labels=param_labels)
