"""funcgrad.nn: activation functions, initializers, stateless layers, losses.

The module protocol
-------------------
A layer is an object that holds only hyper-parameters (sizes, rates, initializers). Its
parameters and state live outside it, as pytrees of arrays (dicts and lists):

    params, state = layer.init(key, sample_input)
    y, new_state = layer.apply(params, state, x, train=False, key=None)

- `init` draws parameters from `key` (a `funcgrad.random` key) and reads only the shape and
  dtype of `sample_input`. `state` holds non-trained variables (BatchNorm's running
  statistics); it is `{}` for stateless layers.
- `apply` is a pure function: the same arguments give the same result, so it can be wrapped
  in `grad`, `jit` and `vmap`. `train` selects training behaviour (Dropout masks, batch
  statistics). `key` is needed only by layers that draw random numbers in training (Dropout,
  attention dropout); a missing key there is an error naming the layer's path.
  `new_state` is the state to use next time (equal to `state` when nothing changed).
- Containers (`Sequential`, `Residual`) pass to child `i` the key `fold_in(key, i)` and its
  own entry of params and state, and collect the new states: one key and one state pytree
  for the whole model. `Sequential` params/state are lists (one entry per layer),
  `Residual`'s are dicts `{'inner', 'shortcut'}`, leaf layers' are dicts (`{'w', 'b'}`).
- Bad input raises a funcgrad error that names the layer's path in the model, the expected
  and the actual shape: `Sequential[2] Linear: expected input with last dimension 64, got
  (8, 32)`.
- Weight sharing: reuse one params subtree in several places of a custom layer (or use
  `Embedding.attend` for a tied output projection); `grad` adds up the contributions.
- Default weight init is JAX/Flax's `lecun_normal` (zeros for biases); pass `w_init` (any
  `nn.initializers` function) for PyTorch-style `he_uniform`/`lecun_uniform`.

A training step, end to end:

    model = nn.Sequential(nn.Linear(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(10))
    params, state = model.init(random.PRNGKey(0), x[:1])

    def loss_fn(params, state, x, y, key):
        logits, state = model.apply(params, state, x, train=True, key=key)
        return nn.softmax_cross_entropy_with_integer_labels(logits, y).mean(), state

    (loss, state), grads = funcgrad.value_and_grad(loss_fn, has_aux=True)(
        params, state, x, y, random.fold_in(key, step))

A custom layer subclasses `nn.Module` and implements `init` and `apply`; to compose children
it calls their `init`/`apply` with `nn.child_key(key, i)` and threads their states, as the
containers do (wrap the calls in `nn.scope(self, ".name", child)` to get error paths).
"""

from funcgrad.nn import initializers  # noqa: F401
from funcgrad.nn.attention import *  # noqa: F401,F403
from funcgrad.nn.functions import *  # noqa: F401,F403
from funcgrad.nn.layers import *  # noqa: F401,F403
from funcgrad.nn.losses import *  # noqa: F401,F403
from funcgrad.nn.module import *  # noqa: F401,F403
from funcgrad.nn.summary import *  # noqa: F401,F403
