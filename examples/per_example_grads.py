"""Per-example gradients with `vmap(grad(...))` on the digits, checked against a Python loop.

    pip install funcgrad[examples]
    python examples/per_example_grads.py [--batch-size 128]

`grad` of the loss of ONE example, mapped over the batch with `vmap`, gives every example's
gradient in one (jitted) program: what differentially private SGD clips, and what
influence or gradient-noise studies need. The script compares it with a loop that calls
`grad` once per example, reports both times, and prints the largest per-example gradient
norms (the hardest examples).
"""

import argparse
import time

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import data, nn, optim, random
from funcgrad.tree_util import tree_leaves, tree_map


def best_of(fn, repeat=5):
    """The shortest of `repeat` timed calls of `fn` (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()

    digits = data.load_digits()
    model = nn.Sequential(nn.Linear(64), nn.Tanh(), nn.Linear(10))
    params, state = model.init(random.PRNGKey(0), fnp.asarray(digits.x_train[:1]))
    x = fnp.asarray(digits.x_train[:args.batch_size])
    y = fnp.asarray(digits.y_train[:args.batch_size])

    def example_loss(params, x, y):  # one example: x (64,), y ()
        logits, _ = model.apply(params, state, x[None])
        return nn.softmax_cross_entropy(logits, nn.one_hot(y[None], 10))[0]

    per_example = fg.jit(fg.vmap(fg.grad(example_loss), in_axes=(None, 0, 0)))
    t0 = time.perf_counter()
    grads = fg.block_until_ready(per_example(params, x, y))  # leaves get a batch axis
    t_first = time.perf_counter() - t0
    t_vmap = best_of(lambda: fg.block_until_ready(per_example(params, x, y)))

    one = fg.jit(fg.grad(example_loss))
    one(params, x[0], y[0])  # compile once
    looped = [one(params, x[i], y[i]) for i in range(args.batch_size)]
    t_loop = best_of(lambda: [one(params, x[i], y[i]) for i in range(args.batch_size)])

    stacked = tree_map(lambda *g: np.stack([np.asarray(a) for a in g]), *looped)
    worst = max(float(np.max(np.abs(np.asarray(a) - b)))
                for a, b in zip(tree_leaves(grads), tree_leaves(stacked)))
    print(f"{args.batch_size} per-example gradients: jit(vmap(grad)) {t_vmap * 1e3:.1f} ms "
          f"(first call, with compilation, {t_first * 1e3:.1f} ms); a loop of jit(grad) "
          f"{t_loop * 1e3:.1f} ms; largest difference {worst:.2e}")
    assert worst < 1e-5, worst

    # The mean of the per-example gradients is the batch gradient.
    batch_loss = lambda p: fnp.mean(fg.vmap(example_loss, in_axes=(None, 0, 0))(p, x, y))
    mean_diff = max(float(np.max(np.abs(np.asarray(g).mean(0) - np.asarray(b))))
                    for g, b in zip(tree_leaves(grads), tree_leaves(fg.grad(batch_loss)(params))))
    print(f"mean of per-example gradients vs batch gradient: largest difference {mean_diff:.2e}")

    norms = np.sqrt(sum((np.asarray(g).reshape(args.batch_size, -1) ** 2).sum(axis=1)
                        for g in tree_leaves(grads)))
    order = np.argsort(norms)[::-1][:5]
    print("largest per-example gradient norms (example: label, norm): "
          + ", ".join(f"{i}: {int(y[i])}, {norms[i]:.3f}" for i in order))
    print(f"global norm of the batch gradient: "
          f"{float(optim.global_norm(fg.grad(batch_loss)(params))):.4f}")


if __name__ == "__main__":
    main()
