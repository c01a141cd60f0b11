"""The mixed-precision example (examples/train_digits_mixed_precision.py) on a short run: it
learns, its forward and backward passes are bfloat16, its master weights and optimizer state
float32, and its gradient is the float32 gradient up to bfloat16's precision."""

import os
import sys

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import nn, random
from funcgrad.tree_util import tree_leaves

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)
import train_digits_mixed_precision as mp  # noqa: E402


def test_a_short_mixed_precision_run_learns_with_float32_master_weights():
    params, state, model, digits, losses = mp.train(epochs=2, steps=40, progress=False,
                                                    verbose=False)
    assert {p.dtype for p in tree_leaves(params)} == {np.dtype(np.float32)}
    assert losses[-1] < 0.5 * losses[0], losses
    acc = mp.accuracy(model, params, state, digits.x_test, digits.y_test)
    assert acc > 0.85, acc


def test_the_passes_run_in_bfloat16_and_the_gradient_is_the_float32_one_rounded():
    digits = fg.data.load_digits()
    model = mp.make_model()
    params, state = model.init(random.PRNGKey(1), fnp.asarray(digits.x_train[:1]))
    x, y = fnp.asarray(digits.x_train[:32]), fnp.asarray(digits.y_train[:32])

    def loss(p, dtype):
        logits, _ = model.apply(mp.cast(p, dtype), state, x.astype(dtype))
        return nn.softmax_cross_entropy(logits.astype(fnp.float32), nn.one_hot(y, 10)).mean()

    text = str(fg.make_jaxpr(fg.grad(loss), static_argnums=1)(params, fnp.bfloat16))
    assert "bf16[32,256] = dot_general" in text and "bf16[256,256] = dot_general" in text
    g16 = fg.grad(loss)(params, fnp.bfloat16)
    g32 = fg.grad(loss)(params, fnp.float32)
    for a, b in zip(tree_leaves(g16), tree_leaves(g32)):
        assert a.dtype == np.float32
        a, b = np.asarray(a), np.asarray(b)
        # bfloat16 rounds by up to 2^-9 per operation; a pre-activation rounded across 0
        # flips its ReLU: 3-5% (relative) in the first layer's gradient, 0.3% in the last
        assert np.linalg.norm(a - b) < 0.1 * np.linalg.norm(b), (a, b)
