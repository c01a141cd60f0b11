"""optax's classification losses beyond cross-entropy: hinge and perceptron losses, sparsemax
losses, focal and poly losses, KL divergences, the ranking softmax loss and Fenchel-Young
losses.

Per-example values, reduced by the caller (except where optax reduces: `ranking_softmax_loss`
takes `reduce_fn`). The cross-entropies themselves live in `funcgrad.nn.losses`. Imports
`funcgrad.numpy`, `funcgrad.nn`, `funcgrad.scipy.special`, `funcgrad.custom_derivatives`,
`funcgrad.batching_api` and `optim.projections`.
"""

import warnings

import funcgrad.numpy as fnp
from funcgrad import nn
from funcgrad.batching_api import vmap
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.errors import FuncgradTypeError, op_error
from funcgrad.optim.projections import projection_simplex
from funcgrad.scipy.special import logsumexp

__all__ = [
    "convex_kl_divergence", "generalized_kl_divergence", "hinge_loss", "kl_divergence",
    "kl_divergence_with_log_targets", "make_fenchel_young_loss", "multiclass_hinge_loss",
    "multiclass_perceptron_loss", "multiclass_sparsemax_loss", "perceptron_loss",
    "poly_loss_cross_entropy", "ranking_softmax_loss", "safe_softmax_cross_entropy",
    "sigmoid_focal_loss", "sparsemax_loss",
]


def _floating(op, x, what="logits"):
    x = fnp.asarray(x)
    if not fnp.issubdtype(x.dtype, fnp.floating):
        raise op_error(op, f"expected floating-point {what}, got {x.dtype}",
                       cls=FuncgradTypeError, hint="convert with .astype(float32)")
    return x


def hinge_loss(predictor_outputs, targets):
    """`max(0, 1 - outputs * targets)` for targets in {-1, 1}.

    Example:
        >>> hinge_loss(fnp.array([0.5, -2.0]), fnp.array([1.0, -1.0])).tolist()
        [0.5, 0.0]
    """
    return fnp.maximum(0, 1 - predictor_outputs * targets)


def perceptron_loss(predictor_outputs, targets):
    """`max(0, -outputs * targets)` for targets in {-1, 1}."""
    if fnp.shape(predictor_outputs) != fnp.shape(targets):
        raise op_error("perceptron_loss", f"outputs {fnp.shape(predictor_outputs)} and targets "
                                          f"{fnp.shape(targets)} must have one shape")
    return fnp.maximum(0, -predictor_outputs * targets)


def _sparse_plus(x):
    return fnp.where(x <= -1.0, 0.0, fnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparsemax_loss(logits, labels):
    """The binary sparsemax loss: `sparse_plus(-logits if labels else logits)`."""
    return _sparse_plus(fnp.where(labels, -logits, logits))


@custom_jvp
def _weighted_logsoftmax(x, weights):
    log_p = nn.log_softmax(x, axis=-1)
    return fnp.where(weights != 0.0, weights * log_p, fnp.zeros_like(log_p))


@_weighted_logsoftmax.defjvp
def _weighted_logsoftmax_jvp(primals, tangents):
    (x, weights), (x_dot, weights_dot) = primals, tangents
    log_p = nn.log_softmax(x, axis=-1)
    out = fnp.where(weights != 0.0, weights * log_p, fnp.zeros_like(log_p))
    dot = (weights * x_dot
           - weights * fnp.sum(x_dot * nn.softmax(x, axis=-1), axis=-1, keepdims=True)
           + weights_dot * log_p)
    return out, dot


def safe_softmax_cross_entropy(logits, labels):
    """Softmax cross-entropy that stays finite (value and gradient) when a logit is -inf
    where its label is 0.

    Example:
        >>> safe_softmax_cross_entropy(fnp.array([[0.0, -fnp.inf]]), fnp.array([[1.0, 0.0]]))
        Array([0.], dtype=float32)
    """
    logits = _floating("safe_softmax_cross_entropy", logits)
    return -fnp.sum(_weighted_logsoftmax(logits, labels), axis=-1)


def multiclass_hinge_loss(scores, labels):
    """`max_k(scores_k + 1 - [k == label]) - scores_label`, for integer labels."""
    one_hot = nn.one_hot(labels, scores.shape[-1])
    return fnp.max(scores + 1.0 - one_hot, axis=-1) - fnp.sum(scores * one_hot, axis=-1)


def multiclass_perceptron_loss(scores, labels):
    """`max_k scores_k - scores_label`, for integer labels."""
    one_hot = nn.one_hot(labels, scores.shape[-1])
    return fnp.max(scores, axis=-1) - fnp.sum(scores * one_hot, axis=-1)


def poly_loss_cross_entropy(logits, labels, *, epsilon=2.0, axis=-1, where=None):
    """PolyLoss (Leng et al. 2022): `cross_entropy + epsilon * (1 - p_target)`."""
    logits = _floating("poly_loss_cross_entropy", logits)
    labels = _floating("poly_loss_cross_entropy", labels, "labels")
    p = nn.softmax(logits, axis=axis, where=where)
    one_minus_pt = fnp.sum(labels * (1 - p), axis=axis, where=where)
    return nn.softmax_cross_entropy(logits, labels, axis=axis, where=where) + \
        epsilon * one_minus_pt


def kl_divergence(log_predictions, targets, axis=-1, where=None):
    """`sum(targets * (log targets - log_predictions))` (0 log 0 = 0).

    Example:
        >>> float(kl_divergence(fnp.log(fnp.array([0.5, 0.5])), fnp.array([0.5, 0.5])))
        0.0
    """
    log_predictions = _floating("kl_divergence", log_predictions, "log-predictions")
    targets = _floating("kl_divergence", targets, "targets")
    terms = targets * (fnp.where(targets == 0, 0, fnp.log(targets)) - log_predictions)
    return fnp.sum(terms, axis=axis, where=where)


def kl_divergence_with_log_targets(log_predictions, log_targets, axis=-1, where=None):
    """`sum(exp(log_targets) * (log_targets - log_predictions))`."""
    log_predictions = _floating("kl_divergence_with_log_targets", log_predictions,
                                "log-predictions")
    log_targets = _floating("kl_divergence_with_log_targets", log_targets, "log-targets")
    return fnp.sum(fnp.exp(log_targets) * (log_targets - log_predictions), axis=axis,
                   where=where)


def generalized_kl_divergence(log_predictions, targets, axis=-1, where=None):
    """The KL divergence of unnormalized measures: `kl + sum(exp(log_predictions) - targets)`.
    """
    return (kl_divergence(log_predictions, targets, axis=axis, where=where)
            + fnp.sum(fnp.exp(log_predictions) - targets, axis=axis, where=where))


def convex_kl_divergence(log_predictions, targets, axis=-1, where=None):
    """Deprecated in optax for `generalized_kl_divergence` (the same function)."""
    warnings.warn("convex_kl_divergence is deprecated, use generalized_kl_divergence",
                  DeprecationWarning, stacklevel=2)
    return generalized_kl_divergence(log_predictions, targets, axis=axis, where=where)


def sigmoid_focal_loss(logits, labels, *, alpha=None, gamma=2.0):
    """Focal loss (Lin et al. 2017): binary cross-entropy times `(1 - p_t) ** gamma`,
    weighted by `alpha` for positives and `1 - alpha` for negatives when given."""
    logits = _floating("sigmoid_focal_loss", logits)
    labels = fnp.asarray(labels).astype(logits.dtype)
    ce = nn.sigmoid_binary_cross_entropy(logits, labels)
    log_p, log_q = nn.log_sigmoid(logits), nn.log_sigmoid(-logits)
    log_one_minus_pt = logsumexp(fnp.stack([log_p, log_q], axis=-1), axis=-1,
                                 b=fnp.stack([1 - labels, labels], axis=-1))
    loss = ce * fnp.exp(gamma * log_one_minus_pt)
    if alpha is None:
        return loss
    return (alpha * labels + (1.0 - alpha) * (1.0 - labels)) * loss


def _multiclass_sparsemax_loss(scores, label):
    proba = projection_simplex(scores)
    scores = (scores - scores[label]).at[label].set(0.0)
    return fnp.dot(proba, fnp.where(proba != 0, scores, 0.0)) + 0.5 * (1.0 - fnp.dot(proba,
                                                                                      proba))


def multiclass_sparsemax_loss(scores, labels):
    """The sparsemax loss (Martins & Astudillo 2016) for integer labels, rows of `scores`."""
    return vmap(_multiclass_sparsemax_loss)(fnp.asarray(scores), fnp.asarray(labels))


def ranking_softmax_loss(logits, labels, *, where=None, weights=None, reduce_fn=fnp.mean):
    """The listwise softmax cross-entropy of ranking: `-sum(labels * log_softmax(logits))`
    per list (last axis), reduced by `reduce_fn` (None: per list). `where` masks items."""
    logits = _floating("ranking_softmax_loss", logits)
    labels = fnp.asarray(labels).astype(logits.dtype)
    if where is not None:
        labels = fnp.where(where, labels, fnp.zeros_like(labels))
        logits = fnp.where(where, logits, -fnp.ones_like(logits) * fnp.inf)
    if weights is not None:
        labels = labels * weights
    loss = -fnp.sum(labels * nn.log_softmax(logits, axis=-1), axis=-1, where=where)
    if where is not None:
        where = fnp.any(where, axis=-1)
    output = reduce_fn(loss, where=where) if reduce_fn is not None else loss
    if reduce_fn is fnp.mean:
        valid = fnp.logical_not(fnp.any(fnp.isnan(loss)))
        output = fnp.where(fnp.isnan(output) & valid, 0.0, output)
    if reduce_fn is None and where is not None:
        output = fnp.where(where, output, 0.0)
    return output


def make_fenchel_young_loss(max_fun):
    """The Fenchel-Young loss of a regularized max: `max_fun(scores) - <targets, scores>`
    along the last axis (Blondel et al. 2020).

    Example:
        >>> loss = make_fenchel_young_loss(logsumexp)   # softmax cross-entropy
    """
    def fenchel_young_loss(scores, targets, *args, **kwargs):
        scores = fnp.asarray(scores)
        rows = fnp.reshape(scores, (-1, scores.shape[-1]))
        max_value = vmap(lambda s: max_fun(s, *args, **kwargs))(rows)
        return fnp.reshape(max_value, scores.shape[:-1]) - fnp.sum(targets * scores, axis=-1)
    return fenchel_young_loss
