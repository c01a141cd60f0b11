"""Dice losses for segmentation (Milletari et al. 2016; the Tversky generalization with
`alpha`/`beta`; the generalized Dice loss of Sudre et al. 2017), as optax 0.2.8.

Imports `funcgrad.numpy` and `funcgrad.nn`.
"""

import funcgrad.numpy as fnp
from funcgrad import nn
from funcgrad.errors import FuncgradValueError, op_error

__all__ = ["binary_dice_loss", "dice_loss", "multiclass_generalized_dice_loss"]


def _reduce(loss, reduction, axis=None):
    if reduction == "mean":
        return fnp.mean(loss, axis=axis)
    if reduction == "sum":
        return fnp.sum(loss, axis=axis)
    if reduction == "none":
        return loss
    raise FuncgradValueError(f"dice_loss: unsupported reduction {reduction!r} "
                             "(use 'mean', 'sum' or 'none')")


def dice_loss(predictions, targets, *, class_weights=None, smooth=1.0, alpha=0.5, beta=0.5,
              apply_softmax: bool = True, reduction: str = "mean",
              ignore_background: bool = False, axis=None):
    """`1 - (|P∩T| + smooth) / (|P∩T| + alpha |P\\T| + beta |T\\P| + smooth)` per example and
    class (classes on the last axis; spatial axes reduced), then reduced over the classes.

    Args:
        predictions: logits [batch, ..., classes] (probabilities with `apply_softmax=False`).
        targets: one-hot or soft targets of the same shape.
        class_weights: [classes] weights of the per-class losses.
        smooth: added to numerator and denominator.
        alpha, beta: the Tversky weights of false positives and false negatives.
        apply_softmax: softmax (sigmoid for one class) the predictions first.
        reduction: "mean", "sum" or "none" over the classes.
        ignore_background: drop class 0.
        axis: the axes summed over (default: all but the first and the last).
    """
    predictions, targets = fnp.asarray(predictions), fnp.asarray(targets)
    if predictions.ndim == targets.ndim - 1:
        predictions = predictions[..., None]
    if targets.ndim == predictions.ndim - 1:
        targets = targets[..., None]
    if predictions.shape != targets.shape:
        raise op_error("dice_loss", f"predictions {tuple(predictions.shape)} and targets "
                                    f"{tuple(targets.shape)} must have one shape",
                       cls=FuncgradValueError)
    if not apply_softmax:
        sums = fnp.sum(predictions, axis=-1)
        if not bool(fnp.allclose(sums, 1.0, rtol=1e-5)):
            raise op_error("dice_loss", "with apply_softmax=False the predictions must be "
                                        "probabilities summing to 1 over the class axis",
                           cls=FuncgradValueError)
        probs = predictions
    elif predictions.shape[-1] == 1:
        probs = nn.sigmoid(predictions)
    else:
        probs = nn.softmax(predictions, axis=-1)
    axis = tuple(range(1, probs.ndim - 1)) if axis is None else axis
    intersection = fnp.sum(probs * targets, axis=axis)
    pred_sum, target_sum = fnp.sum(probs, axis=axis), fnp.sum(targets, axis=axis)
    denominator = (intersection + alpha * (pred_sum - intersection)
                   + beta * (target_sum - intersection) + smooth)
    loss = 1.0 - (intersection + smooth) / denominator
    if class_weights is not None:
        loss = loss * class_weights
    if ignore_background and probs.shape[-1] > 1:
        loss = loss[..., 1:]
    return _reduce(loss, reduction, axis=-1)


def multiclass_generalized_dice_loss(predictions, targets, *, smooth=1.0,
                                     apply_softmax: bool = True,
                                     ignore_background: bool = False):
    """The Dice loss with each class weighted by the inverse square of its frequency."""
    targets = fnp.asarray(targets)
    frequencies = fnp.sum(targets, axis=tuple(range(targets.ndim - 1)))
    weights = 1.0 / (frequencies ** 2 + 1e-7)
    weights = weights / fnp.sum(weights) * weights.shape[0]
    return fnp.mean(dice_loss(predictions, targets, class_weights=weights, smooth=smooth,
                              apply_softmax=apply_softmax, reduction="none",
                              ignore_background=ignore_background))


def binary_dice_loss(predictions, targets, *, smooth=1.0, apply_sigmoid: bool = True):
    """The Dice loss of one foreground class (sigmoid of the logits)."""
    predictions, targets = fnp.asarray(predictions), fnp.asarray(targets)
    if predictions.ndim == targets.ndim and predictions.shape[-1] != 1:
        predictions, targets = predictions[..., None], targets[..., None]
    return dice_loss(predictions, targets, smooth=smooth, apply_softmax=apply_sigmoid,
                     reduction="mean")
