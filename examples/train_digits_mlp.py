"""Train a 64-256-256-10 MLP on scikit-learn's handwritten digits with funcgrad.

    pip install funcgrad[examples]      # scikit-learn (the data) and tqdm (progress bars)
    python examples/train_digits_mlp.py [--epochs 20] [--batch-size 64] [--lr 1e-3]

The whole training step (forward, backward and the Adam update) is one `funcgrad.jit`
program; the parameters and optimizer state are donated so it updates them in place. After
training, the parameters and optimizer state are saved to one checkpoint with `funcgrad.io`,
loaded back and evaluated. The last line reports the test accuracy (about 98% after 20 epochs).
"""

import argparse
import os
import tempfile
import time
from functools import partial

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import data, io, nn, optim, random


def make_model():
    return nn.Sequential(nn.Linear(256), nn.ReLU(), nn.Linear(256), nn.ReLU(), nn.Linear(10))


def train(epochs=20, batch_size=64, lr=1e-3, seed=0, progress=True, verbose=True):
    """Trains the MLP; returns `(params, opt_state, model, digits, seconds)`."""
    digits = data.load_digits()
    model = make_model()
    params, model_state = model.init(random.PRNGKey(seed), fnp.asarray(digits.x_train[:1]))
    opt = optim.adam(lr)
    opt_state = opt.init(params)

    def loss_fn(params, x, y):
        logits, _ = model.apply(params, model_state, x)
        return nn.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @partial(fg.jit, donate_argnums=(0, 1))
    def train_step(params, opt_state, x, y):
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    # drop_last: every step has the same shapes, so the step compiles once.
    loader = data.DataLoader((digits.x_train, digits.y_train), batch_size, shuffle=True,
                             seed=seed, drop_last=True, progress=progress, as_numpy=True)
    start = time.perf_counter()
    for epoch in range(epochs):
        losses = []
        for x, y in loader:
            params, opt_state, loss = train_step(params, opt_state, x, y)
            losses.append(loss)
        if verbose:
            print(f"epoch {epoch + 1:2d}  loss {np.mean([float(v) for v in losses]):.4f}")
    seconds = time.perf_counter() - start
    return params, opt_state, model, digits, seconds


def accuracy(model, params, model_state, x, y):
    logits, _ = model.apply(params, model_state, fnp.asarray(x))
    return float(np.mean(np.asarray(fnp.argmax(logits, axis=-1)) == y))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    args = parser.parse_args()

    params, opt_state, model, digits, seconds = train(
        args.epochs, args.batch_size, args.lr, args.seed, progress=not args.no_progress)
    steps = args.epochs * (len(digits.x_train) // args.batch_size)
    print(f"training: {seconds:.3f} s wall for {args.epochs} epochs ({steps} steps, "
          f"compilation included), {seconds / args.epochs * 1e3:.1f} ms per epoch")
    print(nn.summary(params))

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "digits_mlp.npz")
        io.save(path, {"params": params, "opt_state": opt_state, "epochs": args.epochs})
        restored = io.load(path, like={"params": params, "opt_state": opt_state,
                                       "epochs": args.epochs})
    test_acc = accuracy(model, restored["params"], model_state, digits.x_test, digits.y_test)
    print(f"test accuracy (reloaded checkpoint): {test_acc:.4f}")


if __name__ == "__main__":
    main()
