"""funcgrad.optim: optax-compatible optimizers as pure `(init, update)` pairs over pytrees.

    opt = optim.adam(1e-3)                      # or optim.adamw(1e-3, mask="**/w"), ...
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = optim.apply_updates(params, updates)

`base` holds the protocol, `chain` and masks; `transforms` the building blocks (with their
NamedTuple states); `aliases` the optimizers; `schedules` the learning-rate schedules. Beyond
optax: masks by parameter path (`mask="**/w"`) and `current_lr(state)`.
"""

from funcgrad.optim import aliases, base, schedules, transforms  # noqa: E402,F401
from funcgrad.optim.aliases import *  # noqa: F403
from funcgrad.optim.base import *  # noqa: F403
from funcgrad.optim.schedules import *  # noqa: F403
from funcgrad.optim.transforms import *  # noqa: F403
