"""The rest of optax's optimizers, each a short `chain` recipe with optax 0.2.8's signature and
defaults: AdaBelief, AdaDelta, Adafactor, Adamax(W), Adan, AMSGrad, Fromage, LARS, NAdam(W),
noisy SGD, NovoGrad, optimistic methods, Polyak SGD, RAdam, Rprop, signSGD, Signum, SM3, Yogi.

(`aliases` holds the usual ones: sgd, adam, adamw, rmsprop, adagrad, lion, lamb.) Every
`learning_rate` is a float or a schedule; `current_lr(state)` reads the rate in use.
"""

import functools
import warnings
from collections.abc import Callable
from typing import Any

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradValueError
from funcgrad.optim import scaling as sc
from funcgrad.optim.aliases import adam, adamw, sgd
from funcgrad.optim.base import GradientTransformationExtraArgs, chain
from funcgrad.optim.clipping import add_noise, clip_by_block_rms
from funcgrad.optim.factorized import scale_by_factored_rms
from funcgrad.optim.transforms import (
    add_decayed_weights,
    ema,
    masked,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_trust_ratio,
    trace,
)
from funcgrad.tree_util import tree_map

__all__ = [
    "MaskOrFn", "adabelief", "adadelta", "adafactor", "adamax", "adamaxw", "adan", "amsgrad",
    "fromage", "lars", "nadam", "nadamw", "noisy_sgd", "novograd", "optimistic_adam",
    "optimistic_adam_v2", "optimistic_gradient_descent", "polyak_sgd", "radam", "rprop",
    "sign_sgd", "signum", "sm3", "yogi",
]

MaskOrFn = Any | Callable[[Any], Any] | None  # a bool pytree, or params -> bool pytree


def adabelief(learning_rate, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *,
              nesterov: bool = False) -> GradientTransformationExtraArgs:
    """AdaBelief (Zhuang et al. 2020): Adam scaled by the belief in the gradient (its
    variance around the moving average).

    Example:
        >>> opt = adabelief(1e-3)
    """
    return chain(sc.scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adadelta(learning_rate=None, rho=0.9, eps=1e-6, weight_decay=0.0,
             weight_decay_mask=None) -> GradientTransformationExtraArgs:
    """AdaDelta (Zeiler 2012), with optional coupled weight decay; works without a learning
    rate (None)."""
    return chain(add_decayed_weights(weight_decay, mask=weight_decay_mask),
                 sc.scale_by_adadelta(rho=rho, eps=eps),
                 scale_by_learning_rate(learning_rate))


def adafactor(learning_rate=None, min_dim_size_to_factor: int = 128, decay_rate=0.8,
              decay_offset=0, multiply_by_parameter_scale: bool = True, clipping_threshold=1.0,
              momentum=None, dtype_momentum=fnp.float32, weight_decay_rate=None, eps=1e-30,
              factored: bool = True, weight_decay_mask=None) -> GradientTransformationExtraArgs:
    """Adafactor (Shazeer & Stern 2018): factored second moments for matrices whose two
    largest axes are at least `min_dim_size_to_factor`, RMS clipping, updates scaled by the
    parameters' RMS.

    Example:
        >>> opt = adafactor(learning_rate=1e-2)
    """
    tx = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                eps)]
    if clipping_threshold is not None:
        tx.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        tx.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        tx.append(sc.scale_by_param_block_rms())
    if momentum is not None:
        tx.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        tx.append(add_decayed_weights(weight_decay_rate, mask=weight_decay_mask))
    tx.append(scale(-1))
    return chain(*tx)


def adamax(learning_rate, b1=0.9, b2=0.999, eps=1e-8) -> GradientTransformationExtraArgs:
    """Adamax: Adam with the infinity norm in place of the second moment."""
    return chain(sc.scale_by_adamax(b1=b1, b2=b2, eps=eps),
                 scale_by_learning_rate(learning_rate))


def adamaxw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4,
            mask=None) -> GradientTransformationExtraArgs:
    """Adamax with decoupled weight decay."""
    return chain(sc.scale_by_adamax(b1=b1, b2=b2, eps=eps),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


def adan(learning_rate, b1=0.98, b2=0.92, b3=0.99, eps=1e-8, eps_root=1e-8, weight_decay=0.0,
         mask=None) -> GradientTransformationExtraArgs:
    """Adan (Xie et al. 2022): adaptive Nesterov momentum."""
    return chain(sc.scale_by_adan(b1=b1, b2=b2, b3=b3, eps=eps, eps_root=eps_root),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


def amsgrad(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
            bias_correction_mu: bool = True,
            bias_correction_nu: bool = True) -> GradientTransformationExtraArgs:
    """AMSGrad (Reddi et al. 2018): Adam with a non-decreasing second moment."""
    return chain(sc.scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype, bias_correction_mu,
                                          bias_correction_nu),
                 scale_by_learning_rate(learning_rate))


nadam = functools.partial(adam, nesterov=True)
nadam.__doc__ = """NAdam (Dozat 2016): `adam` with Nesterov momentum (`nesterov=True`)."""
nadamw = functools.partial(adamw, nesterov=True)
nadamw.__doc__ = """NAdamW: `adamw` with Nesterov momentum (`nesterov=True`)."""


def fromage(learning_rate, min_norm=1e-6) -> GradientTransformationExtraArgs:
    """Fromage (Bernstein et al. 2020): layer-wise trust-ratio steps that keep the weight
    norms under control."""
    if not callable(learning_rate):
        mult = 1 / (1 + learning_rate ** 2) ** 0.5
        return chain(scale_by_trust_ratio(min_norm),
                     scale_by_learning_rate(learning_rate * mult),
                     add_decayed_weights(mult - 1))

    def mult_lr(count):
        return 1 / (1 + learning_rate(count) ** 2) ** 0.5
    return chain(scale_by_trust_ratio(min_norm),
                 scale_by_learning_rate(lambda c: mult_lr(c) * learning_rate(c)),
                 add_decayed_weights(lambda c: mult_lr(c) - 1))


def lars(learning_rate, weight_decay=0.0, weight_decay_mask=True, trust_coefficient=0.001,
         eps=0.0, trust_ratio_mask=True, momentum=0.9,
         nesterov: bool = False) -> GradientTransformationExtraArgs:
    """LARS (You et al. 2017): SGD with momentum and layer-wise trust ratios.

    Example:
        >>> opt = lars(0.1, weight_decay=1e-4)
    """
    return chain(add_decayed_weights(weight_decay, mask=_mask_arg(weight_decay_mask)),
                 masked(scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
                        _mask_arg(trust_ratio_mask)),
                 scale_by_learning_rate(learning_rate), trace(decay=momentum,
                                                              nesterov=nesterov))


def _mask_arg(mask):
    # optax lets a single bool stand for "every leaf".
    if isinstance(mask, bool):
        return lambda params: tree_map(lambda _: mask, params)
    return mask


def noisy_sgd(learning_rate, eta=0.01, gamma=0.55, key=None, *,
              seed=None) -> GradientTransformationExtraArgs:
    """SGD with annealed Gaussian gradient noise (Neelakantan et al. 2015); see `add_noise`.
    """
    return chain(add_noise(eta, gamma, key, seed=seed), scale_by_learning_rate(learning_rate))


def sign_sgd(learning_rate) -> GradientTransformationExtraArgs:
    """signSGD (Bernstein et al. 2018): `p -= lr * sign(g)`."""
    return chain(sc.scale_by_sign(), scale_by_learning_rate(learning_rate))


def signum(learning_rate, beta=0.9, accumulator_dtype=None) -> GradientTransformationExtraArgs:
    """Signum: the sign of the momentum (an EMA of the gradients)."""
    return chain(ema(beta, debias=False, accumulator_dtype=accumulator_dtype),
                 sc.scale_by_sign(), scale_by_learning_rate(learning_rate))


def novograd(learning_rate, b1=0.9, b2=0.25, eps=1e-6, eps_root=0.0,
             weight_decay=0.0) -> GradientTransformationExtraArgs:
    """NovoGrad (Ginsburg et al. 2019): layer-wise normalized moments."""
    return chain(sc.scale_by_novograd(b1=b1, b2=b2, eps=eps, eps_root=eps_root,
                                           weight_decay=weight_decay),
                 scale_by_learning_rate(learning_rate))


def optimistic_gradient_descent(learning_rate, alpha=1.0,
                                beta=1.0) -> GradientTransformationExtraArgs:
    """Optimistic gradient descent (for min-max games): `p -= lr ((a + b) g - b g_prev)`."""
    return chain(sc.scale_by_optimistic_gradient(alpha=alpha, beta=beta),
                 scale_by_learning_rate(learning_rate))


def optimistic_adam(learning_rate, optimism=None, b1=0.9, b2=0.999, eps=1e-08, eps_root=0.0,
                    mu_dtype=None, *, nesterov: bool = True) -> GradientTransformationExtraArgs:
    """Deprecated in optax for `optimistic_adam_v2` (constant learning rates only)."""
    warnings.warn("`optimistic_adam` is deprecated, use `optimistic_adam_v2`",
                  DeprecationWarning, stacklevel=2)
    if callable(learning_rate):
        raise FuncgradValueError("optimistic_adam: learning-rate schedules are not supported; "
                                 "use optimistic_adam_v2")
    optimism = learning_rate if optimism is None else optimism
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 sc.scale_by_optimistic_gradient(alpha=learning_rate, beta=optimism),
                 scale_by_learning_rate(1.0))


def optimistic_adam_v2(learning_rate, *, alpha=1.0, beta=1.0, b1=0.9, b2=0.999, eps=1e-08,
                       eps_root=0.0, mu_dtype=None,
                       nesterov: bool = True) -> GradientTransformationExtraArgs:
    """Optimistic Adam (Daskalakis et al. 2018): Adam's direction, then an optimistic step."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 sc.scale_by_optimistic_gradient(alpha=alpha, beta=beta),
                 scale_by_learning_rate(learning_rate))


def polyak_sgd(max_learning_rate=1.0, scaling=1.0, f_min=0.0, eps=0.0,
               variant: str = "sps") -> GradientTransformationExtraArgs:
    """SGD with the Polyak step size `min((f - f_min) / ||g||**2, max_learning_rate)`, times
    `scaling`; `update` needs the loss as `value=`.

    Example:
        >>> opt = polyak_sgd()
        >>> updates, state = opt.update(grads, state, params, value=loss)
    """
    return chain(sgd(learning_rate=scaling),
                 sc.scale_by_polyak(max_learning_rate=max_learning_rate, f_min=f_min, eps=eps,
                                    variant=variant))


def radam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *,
          nesterov: bool = False) -> GradientTransformationExtraArgs:
    """RAdam (Liu et al. 2020): Adam with a rectified variance estimate."""
    return chain(sc.scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def rprop(learning_rate, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6,
          max_step_size=50.0) -> GradientTransformationExtraArgs:
    """Rprop (Riedmiller & Braun 1993): sign-based steps with per-coordinate step sizes
    (full-batch gradients)."""
    return chain(sc.scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size,
                                        max_step_size),
                 scale(-1.0))


def sm3(learning_rate, momentum=0.9) -> GradientTransformationExtraArgs:
    """SM3 (Anil et al. 2019): memory-efficient adaptive steps (constant learning rate)."""
    return chain(sc.scale_by_sm3(momentum), scale(-learning_rate))


def yogi(learning_rate, b1=0.9, b2=0.999, eps=1e-3) -> GradientTransformationExtraArgs:
    """Yogi (Zaheer et al. 2018): Adam with additive second-moment updates."""
    return chain(sc.scale_by_yogi(b1=b1, b2=b2, eps=eps),
                 scale_by_learning_rate(learning_rate))
