"""Loss functions with optax's names and conventions: per-example values, reduced by the caller.

    loss = nn.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

Cross-entropies go through `log_softmax` / `log_sigmoid` with a stop-gradient maximum, so
values and gradients stay finite in float32 at extreme logits (e.g. [0, -1000]); the
gradient of softmax cross-entropy is `softmax(logits) - labels`. Imports `functions` only.
"""

import math

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.nn import functions as F

__all__ = [
    "huber_loss", "l2_loss", "log_cosh", "sigmoid_binary_cross_entropy", "smooth_labels",
    "softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels", "squared_error",
]


def _float(op, x):
    x = fnp.asarray(x)
    if dtypes.kind(x.dtype) not in "f":
        raise op_error(op, f"expected floating-point logits/predictions, got {x.dtype} "
                       f"{tuple(x.shape)}", hint="convert with .astype(funcgrad.numpy.float32)")
    return x


def _same_shape(op, a, b, what=("predictions", "targets")):
    if tuple(a.shape) != tuple(b.shape):
        raise op_error(op, f"{what[0]} shape {tuple(a.shape)} does not match {what[1]} shape "
                       f"{tuple(b.shape)}", cls=FuncgradValueError)


def softmax_cross_entropy(logits, labels, axis=-1, where=None):
    """-sum(labels * log_softmax(logits)) along `axis`, per example.

    Args:
        logits: unnormalized log-probabilities, (..., num_classes).
        labels: probabilities of the same shape (one-hot or smoothed).
        axis: the class axis.
        where: optional boolean mask of the classes to include.

    Example:
        >>> softmax_cross_entropy(fnp.array([[0.0, -1000.0]]), fnp.array([[1.0, 0.0]]))
        Array([0.], dtype=float32)
    """
    logits = _float("softmax_cross_entropy", logits)
    labels = fnp.asarray(labels)
    _same_shape("softmax_cross_entropy", logits, labels, ("logits", "labels"))
    log_p = F.log_softmax(logits, axis=axis, where=where)
    terms = fnp.where(labels == 0, fnp.zeros_like(log_p), labels * log_p)
    return -fnp.sum(terms, axis=axis, where=where)


def softmax_cross_entropy_with_integer_labels(logits, labels, axis=-1, where=None):
    """-log_softmax(logits)[label] per example, for integer class labels.

    Args:
        logits: (..., num_classes) unnormalized log-probabilities.
        labels: integers of shape (...) in [0, num_classes).
        axis: the class axis.
        where: optional boolean mask of the classes to include.

    Example:
        >>> softmax_cross_entropy_with_integer_labels(fnp.array([[100., 100., 101.]]),
        ...                                           fnp.array([2]))
        Array([0.5514...], dtype=float32)
    """
    op = "softmax_cross_entropy_with_integer_labels"
    logits = _float(op, logits)
    labels = fnp.asarray(labels)
    if dtypes.kind(labels.dtype) not in "iu":
        raise op_error(op, f"labels must be integers, got {labels.dtype}",
                       hint="for one-hot or soft labels use softmax_cross_entropy")
    axis = axis % logits.ndim
    batch = tuple(logits.shape[:axis] + logits.shape[axis + 1:])
    if tuple(labels.shape) != batch:
        raise op_error(op, f"labels shape {tuple(labels.shape)} must be the logits shape "
                       f"{tuple(logits.shape)} without the class axis {axis}, i.e. {batch}",
                       cls=FuncgradValueError)
    log_p = F.log_softmax(logits, axis=axis, where=where)
    # Select the label's entry with a comparison against the class index (not a gather): the
    # forward and the gradient then stay elementwise and fuse into one kernel under jit.
    classes = lax.broadcasted_iota(labels.dtype, logits.shape, axis)
    hit = classes == fnp.expand_dims(labels, axis)
    return -fnp.sum(fnp.where(hit, log_p, 0.0), axis=axis)


def smooth_labels(labels, alpha, *, axis=-1, where=None):
    """Label smoothing: `(1 - alpha) * labels + alpha / num_classes`, the classes along `axis`
    (an int or a tuple); with `where`, `num_classes` counts only its True entries (optax's).

    Example:
        >>> smooth_labels(fnp.array([0.0, 1.0]), 0.2).tolist()
        [0.1, 0.9]
    """
    labels = fnp.asarray(labels)
    if where is not None:
        classes = fnp.sum(fnp.broadcast_to(fnp.asarray(where), labels.shape), axis,
                          keepdims=True)
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        classes = math.prod(labels.shape[a] for a in axes)
    return (1.0 - alpha) * labels + alpha / classes


def sigmoid_binary_cross_entropy(logits, labels):
    """Elementwise -labels * log(sigmoid(logits)) - (1 - labels) * log(1 - sigmoid(logits)).

    Example:
        >>> sigmoid_binary_cross_entropy(fnp.array([1000.0, -1000.0]), fnp.array([1., 0.]))
        Array([0., 0.], dtype=float32)
    """
    logits = _float("sigmoid_binary_cross_entropy", logits)
    labels = fnp.asarray(labels, dtype=logits.dtype)
    return -labels * F.log_sigmoid(logits) - (1.0 - labels) * F.log_sigmoid(-logits)


def _errors(op, predictions, targets):
    predictions = _float(op, predictions)
    if targets is None:
        return predictions
    targets = fnp.asarray(targets)
    _same_shape(op, predictions, targets)
    return predictions - targets


def squared_error(predictions, targets=None):
    """Elementwise (predictions - targets) ** 2 (targets default to zero).

    Example:
        >>> squared_error(fnp.array([1.0, 3.0]), fnp.array([0.0, 1.0])).tolist()
        [1.0, 4.0]
    """
    return fnp.square(_errors("squared_error", predictions, targets))


def l2_loss(predictions, targets=None):
    """Elementwise 0.5 * (predictions - targets) ** 2 (optax's convention).

    Example:
        >>> l2_loss(fnp.array([2.0])).tolist()
        [2.0]
    """
    return 0.5 * fnp.square(_errors("l2_loss", predictions, targets))


def huber_loss(predictions, targets=None, *, delta=1.0):
    """Elementwise Huber loss: 0.5 e**2 for |e| <= delta, delta (|e| - 0.5 delta) beyond.

    Example:
        >>> huber_loss(fnp.array([0.5, 3.0])).tolist()
        [0.125, 2.5]
    """
    abs_e = fnp.abs(_errors("huber_loss", predictions, targets))
    quadratic = fnp.minimum(abs_e, delta)
    return 0.5 * quadratic ** 2 + delta * (abs_e - quadratic)


def log_cosh(predictions, targets=None):
    """Elementwise log(cosh(e)) = e + softplus(-2e) - log 2 (optax's stable form).

    Example:
        >>> float(log_cosh(fnp.array(0.0)))
        0.0
    """
    e = _errors("log_cosh", predictions, targets)
    return e + F.softplus(-2.0 * e) - fnp.log(fnp.asarray(2.0, e.dtype))
