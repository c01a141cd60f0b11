"""Training the digits MLP (64-256-256-10, ReLU, softmax cross-entropy, Adam 1e-3, 20 epochs
of batch 64): funcgrad (`examples/train_digits_mlp.py`) against hand-written NumPy, and JAX +
optax / PyTorch when they are installed.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_train_digits.py
        [--epochs 20] [--repeat 3] [--blas-threads N]

Every runner starts from the same initial parameters (funcgrad's init), sees the same batches
in the same order (`DataLoader(shuffle=True, seed=0, drop_last=True)`) and is timed from its
first step to its last, compilation included (each repeat runs in a fresh process, so
funcgrad and JAX compile every time). The table shows the medians over the repeats of the
wall time (and per epoch) and of the process's CPU time (steadier on a shared machine), and
the test accuracy. `--blas-threads N` limits the BLAS
thread pool of every runner (through threadpoolctl, which scikit-learn installs).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def batches(epochs, batch_size):
    from funcgrad import data
    d = data.load_digits()
    loader = data.DataLoader((d.x_train, d.y_train), batch_size, shuffle=True, seed=0,
                             drop_last=True, as_numpy=True)
    return d, [list(loader) for _ in range(epochs)]


def initial_params():
    from train_digits_mlp import make_model

    import funcgrad.numpy as fnp
    from funcgrad import data, random
    x = fnp.asarray(data.load_digits().x_train[:1])
    params, _ = make_model().init(random.PRNGKey(0), x)
    return [(np.array(p["w"]), np.array(p["b"])) for p in params if p]


def accuracy_of(forward, d):
    return float(np.mean(np.argmax(np.asarray(forward(d.x_test)), axis=1) == d.y_test))


# --- runners: each returns (wall s, CPU s, test accuracy) ----------------------------------------


def run_funcgrad(epochs, batch_size):
    from train_digits_mlp import accuracy, train
    run = train(epochs, batch_size, LR, progress=False, verbose=False)
    return run.seconds, run.cpu_seconds, accuracy(run.model, run.params, run.model_state,
                                                  run.digits.x_test, run.digits.y_test)


class NumpyMLP:
    """Forward, backward and Adam by hand, buffers preallocated, Adam in place."""

    def __init__(self, params, n):
        self.p = [a.copy() for layer in params for a in layer]
        self.m = [np.zeros_like(a) for a in self.p]
        self.v = [np.zeros_like(a) for a in self.p]
        self.g = [np.empty_like(a) for a in self.p]
        self.tmp = [np.empty_like(a) for a in self.p]
        self.h1, self.h2 = np.empty((n, 256), np.float32), np.empty((n, 256), np.float32)
        self.d1, self.d2 = np.empty((n, 256), np.float32), np.empty((n, 256), np.float32)
        self.z = np.empty((n, 10), np.float32)
        self.t = 0

    def forward(self, x):
        w1, b1, w2, b2, w3, b3 = self.p
        h = np.maximum(x @ w1 + b1, 0)
        return np.maximum(h @ w2 + b2, 0) @ w3 + b3

    def step(self, x, y):
        w1, b1, w2, b2, w3, b3 = self.p
        h1, h2, z, d1, d2 = self.h1, self.h2, self.z, self.d1, self.d2
        n = len(x)
        np.matmul(x, w1, out=h1)
        h1 += b1
        np.maximum(h1, 0, out=h1)
        np.matmul(h1, w2, out=h2)
        h2 += b2
        np.maximum(h2, 0, out=h2)
        np.matmul(h2, w3, out=z)
        z += b3
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        loss = -np.mean(np.log(z[np.arange(n), y]))
        z[np.arange(n), y] -= 1  # dlogits = (softmax - onehot) / n
        z /= n
        gw1, gb1, gw2, gb2, gw3, gb3 = self.g
        np.matmul(h2.T, z, out=gw3)
        z.sum(axis=0, out=gb3)
        np.matmul(z, w3.T, out=d2)
        d2 *= h2 > 0
        np.matmul(h1.T, d2, out=gw2)
        d2.sum(axis=0, out=gb2)
        np.matmul(d2, w2.T, out=d1)
        d1 *= h1 > 0
        np.matmul(x.T, d1, out=gw1)
        d1.sum(axis=0, out=gb1)
        self.t += 1
        lr_t = LR * np.sqrt(1 - B2 ** self.t) / (1 - B1 ** self.t)
        for p, g, m, v, tmp in zip(self.p, self.g, self.m, self.v, self.tmp):
            m *= B1
            m += (1 - B1) * g
            v *= B2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - B2
            v += tmp
            np.sqrt(v, out=tmp)
            tmp += EPS
            np.divide(m, tmp, out=tmp)
            tmp *= lr_t
            p -= tmp
        return loss


def run_numpy(epochs, batch_size):
    d, epoch_batches = batches(epochs, batch_size)
    net = NumpyMLP(initial_params(), batch_size)
    start, cpu = time.perf_counter(), time.process_time()
    for epoch in epoch_batches:
        losses = [net.step(x, y) for x, y in epoch]
    del losses
    return (time.perf_counter() - start, time.process_time() - cpu,
            accuracy_of(net.forward, d))


def run_jax(epochs, batch_size):
    import jax
    import jax.numpy as jnp
    import optax
    d, epoch_batches = batches(epochs, batch_size)
    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in initial_params()]
    opt = optax.adam(LR)

    def forward(params, x):
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            x = jax.nn.relu(x) if i < len(params) - 1 else x
        return x

    def loss_fn(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(forward(params, x), y).mean()

    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    start, cpu = time.perf_counter(), time.process_time()
    state = opt.init(params)
    for epoch in epoch_batches:
        for x, y in epoch:
            params, state, loss = step(params, state, x, y)
        float(loss)
    return (time.perf_counter() - start, time.process_time() - cpu,
            accuracy_of(lambda x: forward(params, x), d))


def run_torch(epochs, batch_size):
    import torch
    d, epoch_batches = batches(epochs, batch_size)
    layers = []
    for i, (w, b) in enumerate(initial_params()):
        lin = torch.nn.Linear(*w.shape)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b))
        layers += [lin, torch.nn.ReLU()] if i < 2 else [lin]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=LR, betas=(B1, B2), eps=EPS)
    start, cpu = time.perf_counter(), time.process_time()
    for epoch in epoch_batches:
        for x, y in epoch:
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(
                model(torch.from_numpy(x)), torch.from_numpy(y.astype(np.int64)))
            loss.backward()
            opt.step()
        loss.item()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    with torch.no_grad():
        return seconds, cpu, accuracy_of(lambda x: model(torch.from_numpy(x)).numpy(), d)


RUNNERS = {"funcgrad jit": run_funcgrad, "numpy by hand": run_numpy, "jax + optax": run_jax,
           "pytorch": run_torch}
NEEDS = {"jax + optax": ("jax", "optax"), "pytorch": ("torch",)}


def available(name):
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in NEEDS.get(name, ()))


def worker(name, epochs, batch_size, blas_threads):
    if blas_threads:
        from threadpoolctl import threadpool_limits
        threadpool_limits(blas_threads)
    seconds, cpu, acc = RUNNERS[name](epochs, batch_size)
    print(json.dumps({"seconds": seconds, "cpu": cpu, "accuracy": acc}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--blas-threads", type=int, default=0, help="0: the BLAS default")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.epochs, args.batch_size, args.blas_threads)
    print(f"# digits MLP 64-256-256-10, Adam, {args.epochs} epochs of batch {args.batch_size}; "
          f"median of {args.repeat} fresh processes; BLAS threads: "
          f"{args.blas_threads or 'default'}")
    print(f"{'':16} {'wall s':>8} {'ms/epoch':>9} {'CPU s':>7} {'test acc':>9}  (wall, all runs)")
    for name in RUNNERS:
        if not available(name):
            print(f"{name:16} {'not installed':>28}")
            continue
        runs = []
        for _ in range(args.repeat):
            cmd = [sys.executable, __file__, "--worker", name, "--epochs", str(args.epochs),
                   "--batch-size", str(args.batch_size), "--blas-threads",
                   str(args.blas_threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        secs = sorted(r["seconds"] for r in runs)
        med, cpu = float(np.median(secs)), float(np.median([r["cpu"] for r in runs]))
        print(f"{name:16} {med:8.3f} {med / args.epochs * 1e3:9.1f} {cpu:7.3f} "
              f"{runs[0]['accuracy']:9.4f}  ({', '.join(f'{s:.3f}' for s in secs)})")


if __name__ == "__main__":
    main()
