"""Similarity and metric-learning losses of optax: cosine similarity and distance, the
NT-Xent contrastive loss (SimCLR) and the triplet margin loss.

Imports `funcgrad.numpy` and `funcgrad.lax`.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.errors import FuncgradTypeError, FuncgradValueError, op_error

__all__ = ["cosine_distance", "cosine_similarity", "ntxent", "triplet_margin_loss"]


def _floating(op, *arrays):
    out = [fnp.asarray(a) for a in arrays]
    for a in out:
        if not fnp.issubdtype(a.dtype, fnp.floating):
            raise op_error(op, f"expected floating-point inputs, got {a.dtype}",
                           cls=FuncgradTypeError)
    return out


def cosine_similarity(predictions, targets, *, epsilon=0.0, axis=-1, where=None):
    """`<a, b> / (||a|| ||b||)` along `axis` (norms clipped below at `sqrt(epsilon)`).

    Example:
        >>> float(cosine_similarity(fnp.array([1.0, 0.0]), fnp.array([1.0, 1.0])))
        0.7071...
    """
    a, b = _floating("cosine_similarity", predictions, targets)
    a_norm = fnp.sqrt(fnp.clip(fnp.sum(fnp.square(a), axis=axis, where=where, keepdims=True),
                               epsilon))
    b_norm = fnp.sqrt(fnp.clip(fnp.sum(fnp.square(b), axis=axis, where=where, keepdims=True),
                               epsilon))
    return fnp.sum((a / a_norm) * (b / b_norm), axis=axis, where=where)


def cosine_distance(predictions, targets, *, epsilon=0.0, axis=-1, where=None):
    """`1 - cosine_similarity`."""
    return 1.0 - cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis,
                                   where=where)


def ntxent(embeddings, labels, temperature=0.07):
    """The normalized temperature-scaled cross-entropy (NT-Xent, Chen et al. 2020): for each
    pair of embeddings with the same label, the softmax cross-entropy of their cosine
    similarity against those of the pairs with different labels; averaged.

    Args:
        embeddings: [batch, features].
        labels: [batch] integers; equal labels mark positive pairs.
        temperature: divides the similarities.
    """
    (embeddings,) = _floating("ntxent", embeddings)
    labels = fnp.asarray(labels)
    if labels.shape[0] != embeddings.shape[0]:
        raise op_error("ntxent", f"labels ({labels.shape[0]}) and embeddings "
                                 f"({embeddings.shape[0]}) need the same leading dimension",
                       cls=FuncgradValueError)
    eps = float(np.finfo(embeddings.dtype).eps)
    xcs = cosine_similarity(embeddings[None, :, :], embeddings[:, None, :], epsilon=eps)
    xcs = xcs / temperature
    same = fnp.expand_dims(labels, 1) == fnp.expand_dims(labels, 0)
    diffs = fnp.logical_not(same)
    matches = same & fnp.logical_not(fnp.eye(same.shape[0], dtype=bool))
    xcs_diffs = fnp.where(diffs, xcs, -fnp.inf)
    xcs_matches = fnp.where(matches, xcs, -fnp.inf)
    xcs_max = fnp.max(fnp.concatenate((xcs_diffs, xcs_matches), axis=-1), axis=1,
                      keepdims=True)
    shift_diffs = xcs_diffs - lax.stop_gradient(xcs_max)
    shift_matches = xcs_matches - lax.stop_gradient(xcs_max)
    denom = fnp.sum(fnp.exp(shift_diffs), axis=1, keepdims=True) + fnp.exp(shift_matches)
    log_softmax = shift_matches - fnp.log(denom)
    return -fnp.sum(fnp.where(matches, log_softmax, 0.0)) / fnp.sum(matches)


def triplet_margin_loss(anchors, positives, negatives, axis: int = -1, norm_degree=2,
                        margin=1.0, eps=1e-6):
    """`max(d(anchor, positive) - d(anchor, negative) + margin, 0)` with the
    `norm_degree`-norm distance along `axis`.

    Example:
        >>> triplet_margin_loss(fnp.zeros((1, 2)), fnp.zeros((1, 2)), fnp.ones((1, 2)))
        Array([0.], dtype=float32)
    """
    anchors, positives, negatives = _floating("triplet_margin_loss", anchors, positives,
                                              negatives)

    def distance(a, b):
        return fnp.power(fnp.sum(fnp.power(a - b, norm_degree), axis) + eps, 1 / norm_degree)

    return fnp.maximum(distance(anchors, positives) - distance(anchors, negatives) + margin, 0)
