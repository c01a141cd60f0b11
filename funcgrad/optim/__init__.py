"""funcgrad.optim: optax-compatible optimizers as pure `(init, update)` pairs over pytrees.

    opt = optim.adam(1e-3)                      # or optim.adamw(1e-3, mask="**/w"), ...
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = optim.apply_updates(params, updates)

`import funcgrad.optim as optax` runs optax (0.2.8) code: the top level has optax's names,
and the submodules are optax's namespaces (`losses`, `schedules`, `transforms`, `contrib`,
`tree_utils`, `tree`, `projections`, `perturbations`, `microbatching`). `base` holds the
protocol, `chain` and masks; `transforms` the building blocks (with their NamedTuple states);
`aliases` and `optimizers` the optimizers; `scaling`, `factorized`, `linesearch`,
`quasi_newton`, `wrappers`, `accumulation`, `combining`, `clipping` and `inject` the rest, by
topic. Beyond optax: masks by parameter path (`mask="**/w"`) and `current_lr(state)`.
"""

from funcgrad.optim import (  # noqa: F401
    aliases,
    base,
    contrib,
    factorized,
    inject,
    linear_algebra,
    linesearch,
    lookahead,
    losses,
    microbatching,
    numerics,
    optimizers,
    perturbations,
    projections,
    quasi_newton,
    scaling,
    schedules,
    transforms,
    tree,
    tree_utils,
    utils,
)
from funcgrad.optim.aliases import *  # noqa: F403
from funcgrad.optim.base import *  # noqa: F403
from funcgrad.optim.factorized import *  # noqa: F403
from funcgrad.optim.linear_algebra import *  # noqa: F403
from funcgrad.optim.linesearch import *  # noqa: F403
from funcgrad.optim.lookahead import *  # noqa: F403
from funcgrad.optim.losses import (  # noqa: F401  (the losses optax has at its top level)
    convex_kl_divergence,
    cosine_distance,
    cosine_similarity,
    ctc_loss,
    ctc_loss_with_forward_probs,
    generalized_kl_divergence,
    hinge_loss,
    huber_loss,
    kl_divergence,
    l2_loss,
    log_cosh,
    ntxent,
    safe_softmax_cross_entropy,
    sigmoid_binary_cross_entropy,
    sigmoid_focal_loss,
    smooth_labels,
    softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels,
    squared_error,
)
from funcgrad.optim.microbatching import microbatch  # noqa: F401
from funcgrad.optim.numerics import *  # noqa: F403
from funcgrad.optim.optimizers import *  # noqa: F403
from funcgrad.optim.quasi_newton import *  # noqa: F403
from funcgrad.optim.scaling import *  # noqa: F403
from funcgrad.optim.schedules import *  # noqa: F403
from funcgrad.optim.transforms import *  # noqa: F403
from funcgrad.optim.tree_utils import tree_map_params  # noqa: F401
from funcgrad.optim.utils import *  # noqa: F403

bias_correction = tree_utils.tree_bias_correction
update_moment = tree_utils.tree_update_moment
update_infinity_moment = tree_utils.tree_update_infinity_moment
update_moment_per_elem_norm = tree_utils.tree_update_moment_per_elem_norm
