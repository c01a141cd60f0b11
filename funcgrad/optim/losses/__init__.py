"""optax.losses: every loss of optax 0.2.8, per example, reduced by the caller.

The cross-entropies and regression losses that `funcgrad.nn` already has (`l2_loss`,
`huber_loss`, `softmax_cross_entropy`, ...) live there and are re-exported here; the others
live in this package: `classification` (hinge, sparsemax, focal, poly, KL, ranking,
Fenchel-Young), `sequence` (CTC), `similarity` (cosine, NT-Xent, triplet) and `segmentation`
(Dice).
"""

from funcgrad.nn.losses import (  # noqa: F401
    huber_loss,
    l2_loss,
    log_cosh,
    sigmoid_binary_cross_entropy,
    smooth_labels,
    softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels,
    squared_error,
)
from funcgrad.optim.losses.classification import *  # noqa: F403
from funcgrad.optim.losses.segmentation import *  # noqa: F403
from funcgrad.optim.losses.sequence import *  # noqa: F403
from funcgrad.optim.losses.similarity import *  # noqa: F403
