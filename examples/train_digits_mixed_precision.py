"""Mixed-precision training: the digits MLP of `train_digits_mlp.py` with its forward and
backward passes in bfloat16 and float32 master weights.

    pip install funcgrad[examples]
    python examples/train_digits_mixed_precision.py [--epochs 20] [--batch-size 64]
        [--lr 1e-3] [--no-progress]

The recipe (as JAX's mixed-precision libraries do it): the parameters and Adam's state stay
float32 ("master weights"); each step casts the parameters and the batch to bfloat16, so every
matrix product, activation and their gradients run in bfloat16 (computed in float32 and
rounded after every operation, on every backend; matrix products accumulate in float32 and
round once). The logits are cast back to float32 for the softmax cross-entropy, and the
gradient reaches the float32 parameters through the cast's transpose, so the optimizer updates
float32 numbers: bfloat16's 8 bits of precision would lose Adam's small updates. bfloat16 has
float32's exponent range, so no loss scaling is needed (float16 would need it). The test
accuracy matches the float32 example's (about 98%); the last lines compare the two.
"""

import argparse
import time

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import data, nn, optim, random, tree_util

COMPUTE = fnp.bfloat16  # the dtype of the forward and backward passes


def make_model():
    return nn.Sequential(nn.Linear(256), nn.ReLU(), nn.Linear(256), nn.ReLU(), nn.Linear(10))


def cast(tree, dtype):
    """Every float array of `tree` as `dtype` (a cast: its gradient casts back)."""
    return tree_util.tree_map(lambda p: p.astype(dtype), tree)


def train(epochs=20, batch_size=64, lr=1e-3, seed=0, progress=True, verbose=True,
          steps=None):
    """Trains the MLP in mixed precision; returns (float32 params, model state, model, digits,
    epoch losses). `steps` stops early (a smoke test)."""
    digits = data.load_digits()
    model = make_model()
    params, model_state = model.init(random.PRNGKey(seed), fnp.asarray(digits.x_train[:1]))
    opt = optim.adam(lr)
    opt_state = opt.init(params)  # float32, like the master parameters

    def loss_fn(master, x, y):
        logits, _ = model.apply(cast(master, COMPUTE), model_state, x.astype(COMPUTE))
        logits = logits.astype(fnp.float32)  # the loss in float32
        return nn.softmax_cross_entropy(logits, nn.one_hot(y, 10)).mean()

    @fg.jit
    def train_step(params, opt_state, x, y):
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y)  # float32 grads
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    loader = data.DataLoader((digits.x_train, digits.y_train), batch_size, shuffle=True,
                             seed=seed, drop_last=True, progress=progress)
    epoch_losses, done = [], 0
    for epoch in range(epochs):
        losses = []
        for x, y in loader:
            params, opt_state, loss = train_step(params, opt_state, x, y)
            losses.append(float(loss))
            done += 1
            if steps is not None and done >= steps:
                break
        epoch_losses.append(float(np.mean(losses)))
        if verbose:
            print(f"epoch {epoch + 1:2d}  loss {epoch_losses[-1]:.4f}")
        if steps is not None and done >= steps:
            break
    return params, model_state, model, digits, epoch_losses


def accuracy(model, params, model_state, x, y, dtype=COMPUTE):
    """Test accuracy with the forward pass in `dtype`."""
    logits, _ = model.apply(cast(params, dtype), model_state, fnp.asarray(x).astype(dtype))
    return float(np.mean(np.asarray(fnp.argmax(logits, axis=-1)) == y))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    args = parser.parse_args()

    start = time.perf_counter()
    params, model_state, model, digits, _ = train(args.epochs, args.batch_size, args.lr,
                                                  args.seed, progress=not args.no_progress)
    seconds = time.perf_counter() - start
    dtypes = {str(p.dtype) for p in tree_util.tree_leaves(params)}
    print(f"training: {seconds:.2f} s for {args.epochs} epochs; master weights {dtypes}")
    test = (digits.x_test, digits.y_test)
    print(f"test accuracy, bfloat16 forward: {accuracy(model, params, model_state, *test):.4f}")
    print(f"test accuracy, float32 forward:  "
          f"{accuracy(model, params, model_state, *test, dtype=fnp.float32):.4f}")


if __name__ == "__main__":
    main()
