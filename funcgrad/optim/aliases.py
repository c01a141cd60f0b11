"""The usual optimizers as short `chain` recipes of `transforms`, with optax 0.2.8's defaults.

Every `learning_rate` is a float or a schedule; `current_lr(state)` reads the rate in use.
`mask` arguments take a bool pytree, a callable or glob patterns over leaf paths (see
`masked`). Imports only `optim.base` and `optim.transforms`.
"""

from funcgrad.optim.base import GradientTransformation, chain, identity
from funcgrad.optim.transforms import (
    add_decayed_weights,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_lion,
    scale_by_rms,
    scale_by_rss,
    scale_by_stddev,
    scale_by_trust_ratio,
    trace,
)

__all__ = ["adagrad", "adam", "adamw", "lamb", "lion", "rmsprop", "sgd"]


def sgd(learning_rate, momentum: float | None = None, nesterov: bool = False,
        accumulator_dtype=None) -> GradientTransformation:
    """Stochastic gradient descent, optionally with (Nesterov) momentum.

    Momentum follows optax and PyTorch: `u = momentum * u + g; p -= lr * u`. The
    exponential-moving-average convention `u = b * u + (1 - b) * g; p -= lr' * u` (Needle's)
    takes the same steps when `lr = lr' * (1 - b)`; it is also available directly as
    `chain(ema(b, debias=False), scale(-lr'))`.

    Example:
        >>> opt = sgd(0.1, momentum=0.9)
    """
    return chain(
        trace(momentum, nesterov, accumulator_dtype) if momentum is not None else identity(),
        scale_by_learning_rate(learning_rate))


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0, mu_dtype=None, *, nesterov: bool = False
         ) -> GradientTransformation:
    """Adam (Kingma & Ba): `p -= lr * mu_hat / (sqrt(nu_hat + eps_root) + eps)`.

    Example:
        >>> opt = adam(1e-3)
        >>> state = opt.init(params)
    """
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adamw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, mu_dtype=None, weight_decay: float = 1e-4, mask=None, *,
          nesterov: bool = False) -> GradientTransformation:
    """Adam with decoupled weight decay: `p -= lr * (adam_update + weight_decay * p)`.

    Example:
        >>> opt = adamw(1e-3, weight_decay=0.05, mask="**/w")   # no decay on biases
    """
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate, decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
            eps_in_sqrt: bool = True, centered: bool = False, momentum: float | None = None,
            nesterov: bool = False, bias_correction: bool = False) -> GradientTransformation:
    """RMSProp: `p -= lr * g / sqrt(nu + eps)` with `nu = decay * nu + (1 - decay) * g**2`
    (`centered` subtracts the squared mean gradient; `momentum` adds a `trace` after;
    `bias_correction` debiases the moments, see `scale_by_rms`)."""
    scaling = (scale_by_stddev if centered else scale_by_rms)(
        decay, eps, initial_scale, eps_in_sqrt, bias_correction)
    return chain(scaling, scale_by_learning_rate(learning_rate),
                 trace(momentum, nesterov) if momentum is not None else identity())


def adagrad(learning_rate, initial_accumulator_value: float = 0.1,
            eps: float = 1e-7) -> GradientTransformation:
    """Adagrad: `p -= lr * g / sqrt(sum of g**2 + eps)`."""
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


def lion(learning_rate, b1: float = 0.9, b2: float = 0.99, mu_dtype=None,
         weight_decay: float = 1e-3, mask=None) -> GradientTransformation:
    """Lion (Chen et al. 2023): `p -= lr * (sign((1-b1) g + b1 mu) + weight_decay * p)`.

    Note optax's default `weight_decay=1e-3` (kept here); use a learning rate 3-10x smaller
    than Adam's.
    """
    return chain(scale_by_lion(b1, b2, mu_dtype), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def lamb(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         eps_root: float = 0.0, weight_decay: float = 0.0, mask=None) -> GradientTransformation:
    """LAMB (You et al. 2020): Adam with weight decay, rescaled layer-wise by
    `||param|| / ||update||`."""
    return chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask),
                 scale_by_trust_ratio(), scale_by_learning_rate(learning_rate))
