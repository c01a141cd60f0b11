"""Train a small Elman RNN, written with funcgrad.numpy and `lax.scan`, to predict the next
value of noisy sine waves.

    python examples/train_rnn_scan.py [--steps 300] [--hidden 32] [--seq 40] [--curves PATH]

The data are generated here: each sequence is `sin(f t + phase)` sampled at `seq + 1` points
with a random frequency and phase, plus Gaussian noise; the model reads the first `seq`
values and predicts, at every step, the next one. The recurrence is one `lax.scan` over time
(time-major arrays), the parameters are a dict, the optimizer is a few lines of Adam, and the
whole training step (forward scan, backward scan, update) is one `jit`-compiled program whose
generated source runs real Python `for` loops around compiled step bodies.
Prints the loss every `--every` steps and a final line with the test loss against two
baselines (predicting zero, and repeating the last value), then the loss curve's summary (a
PNG in `examples/out/` when matplotlib is installed).
"""

import argparse
import time

import numpy as np
from _curves import curves_path, report_curves

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.tree_util import tree_map


def make_data(rng, n, seq, noise=0.05):
    """(inputs, targets): time-major float32 arrays of shape (seq, n, 1)."""
    freq = rng.uniform(0.5, 1.5, size=(n, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(n, 1))
    t = np.arange(seq + 1)[None, :] * 0.3
    waves = np.sin(freq * t + phase) + noise * rng.standard_normal((n, seq + 1))
    waves = waves.T[:, :, None].astype(np.float32)
    return waves[:-1], waves[1:]


def init_params(rng, hidden):
    scale = lambda fan_in: np.float32(1.0 / np.sqrt(fan_in))
    return {
        "w_in": (rng.standard_normal((1, hidden)) * scale(1)).astype(np.float32),
        "w_rec": (rng.standard_normal((hidden, hidden)) * scale(hidden)).astype(np.float32),
        "b": np.zeros(hidden, np.float32),
        "w_out": (rng.standard_normal((hidden, 1)) * scale(hidden)).astype(np.float32),
        "b_out": np.zeros(1, np.float32),
    }


def predict(params, xs):
    """Run the RNN over time-major `xs` (seq, batch, 1): predictions of the same shape."""
    def step(h, x):
        h = fnp.tanh(x @ params["w_in"] + h @ params["w_rec"] + params["b"])
        return h, h @ params["w_out"] + params["b_out"]
    h0 = fnp.zeros((xs.shape[1], params["w_rec"].shape[0]), fnp.float32)
    _, ys = lax.scan(step, h0, xs)
    return ys


def loss_fn(params, xs, ys):
    return fnp.mean((predict(params, xs) - ys) ** 2)


def adam_init(params):
    zeros = lambda p: fnp.zeros_like(p)
    return {"m": tree_map(zeros, params), "v": tree_map(zeros, params), "t": fnp.array(0.0)}


@fg.jit
def train_step(params, opt, xs, ys, lr=3e-3, b1=0.9, b2=0.999, eps=1e-8):
    loss, grads = fg.value_and_grad(loss_fn)(params, xs, ys)
    t = opt["t"] + 1.0
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    step = lr * fnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    params = tree_map(lambda p, m, v: p - step * m / (fnp.sqrt(v) + eps), params, m, v)
    return params, {"m": m, "v": v, "t": t}, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--seq", type=int, default=40)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--curves", default=None, help='PNG path ("" for none)')
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    params = tree_map(fnp.asarray, init_params(rng, args.hidden))
    opt = adam_init(params)
    test_x, test_y = make_data(rng, 256, args.seq)
    start, losses = time.perf_counter(), []
    for i in range(1, args.steps + 1):
        xs, ys = make_data(rng, args.batch, args.seq)
        params, opt, loss = train_step(params, opt, fnp.asarray(xs), fnp.asarray(ys))
        losses.append(float(loss))
        if i == 1 or i % args.every == 0:
            print(f"step {i:4d}  train loss {float(loss):.4f}  "
                  f"({time.perf_counter() - start:5.1f} s)", flush=True)
    test = float(fg.jit(loss_fn)(params, fnp.asarray(test_x), fnp.asarray(test_y)))
    zero = float(np.mean(test_y ** 2))
    repeat = float(np.mean((test_x - test_y) ** 2))
    print(f"final: test loss {test:.4f} after {args.steps} steps "
          f"(predict-zero {zero:.4f}, repeat-last {repeat:.4f}) in "
          f"{time.perf_counter() - start:.1f} s")
    report_curves(curves_path("train_rnn_scan", args.curves),
                  {"mean squared error": {"train": losses,
                                          "test (final)": ([args.steps], [test]),
                                          "repeat-last": ([1, args.steps], [repeat, repeat])}},
                  title=f"RNN (hidden {args.hidden}) on noisy sine waves")


if __name__ == "__main__":
    main()
