"""optax.contrib: the newer optimizers of optax 0.2.8, with optax's names and signatures.

Muon (`muon`), schedule-free methods (`schedule_free*`), SAM (`sam`), learning-rate-free
methods (`prodigy`, `dadapt_adamw`, `cocob`, `dog`, `dowg`, `mechanize`, `momo`,
`momo_adam`), Adam variants (`ademamix`, `simplified_ademamix`, `adopt`, `acprop`,
`madgrad`, `sophia`), GaLore, `reduce_on_plateau`, complex parameters
(`split_real_and_imaginary`) and DP-SGD.

    opt = optim.contrib.muon(learning_rate=0.02)
"""

from funcgrad.optim.contrib.adaptive import *  # noqa: F403
from funcgrad.optim.contrib.misc import *  # noqa: F403
from funcgrad.optim.contrib.muon import *  # noqa: F403
from funcgrad.optim.contrib.parameter_free import *  # noqa: F403
from funcgrad.optim.contrib.projection_based import *  # noqa: F403
from funcgrad.optim.contrib.schedule_free import *  # noqa: F403
