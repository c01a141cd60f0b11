"""Data-parallel training of the digits MLP over processes, checked against one process.

    pip install funcgrad[distributed,examples]
    mpiexec -n 2 python examples/data_parallel_digits.py     # or -n 4, or plain python

Every process holds the same parameters (broadcast from process 0) and takes its slice of
each global batch. The jitted step is a `shard_map` over the mesh axis "data": the loss is
`lax.pmean` of the per-process losses, so `value_and_grad` returns the gradient of the
global-batch loss; reverse mode puts one allreduce per parameter where that gradient is
complete, and jit's bucketing pass groups them. Adam updates the (still replicated)
parameters. At the end, process 0 trains the same model in one process on the full global
batches and prints how far the two runs' parameters are apart: float32 rounding only,
since the per-process sums are added in a different order than the full-batch sum, and the
two loss curves (a PNG in `examples/out/` with matplotlib, else a one-line summary).
"""

import argparse
import time

import numpy as np
from _curves import curves_path, report_curves

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import data, lax, nn, optim, random
from funcgrad.distributed import Mesh, P, shard_map


def make_model():
    return nn.Sequential(nn.Linear(256), nn.ReLU(), nn.Linear(256), nn.ReLU(), nn.Linear(10))


def loss_fn(model, state, params, x, y):
    logits, _ = model.apply(params, state, x)
    return nn.softmax_cross_entropy(logits, nn.one_hot(y, 10)).mean()


def make_steps(model, state, opt, mesh):
    """The data-parallel step (per-process batch) and the single-process step (full batch)."""
    def update(params, opt_state, grads):
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state

    @fg.jit
    @shard_map(mesh=mesh, in_specs=(P(), P(), P("data"), P("data")), out_specs=P())
    def parallel_step(params, opt_state, x, y):
        global_loss = lambda p: lax.pmean(loss_fn(model, state, p, x, y), "data")
        loss, grads = fg.value_and_grad(global_loss)(params)
        return (*update(params, opt_state, grads), loss)

    @fg.jit
    def single_step(params, opt_state, x, y):
        loss, grads = fg.value_and_grad(lambda p: loss_fn(model, state, p, x, y))(params)
        return (*update(params, opt_state, grads), loss)
    return parallel_step, single_step


def train(step, params, opt_state, digits, global_batch, epochs, part):
    """Runs `epochs` epochs of `step` on `part(x, y)` of each global batch."""
    loader = data.DataLoader((digits.x_train, digits.y_train), global_batch, shuffle=True,
                             seed=0, drop_last=True, as_numpy=True)
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            params, opt_state, loss = step(params, opt_state, *part(x, y))
            losses.append(float(loss))
    return params, opt_state, losses


def max_differences(a, b):
    """(max abs difference, max abs difference relative to the largest magnitude)."""
    pairs = [(np.asarray(u, np.float64), np.asarray(v, np.float64))
             for u, v in zip(fg.tree_util.tree_leaves(a), fg.tree_util.tree_leaves(b))]
    diff = max(float(np.max(np.abs(u - v))) for u, v in pairs)
    scale = max(float(np.max(np.abs(u))) for u, _ in pairs)
    return diff, diff / scale


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--global-batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--curves", default=None, help='PNG path ("" for none)')
    args = parser.parse_args()

    mesh = Mesh(("data",))
    rank, n = fg.distributed.process_index(), fg.distributed.process_count()
    if args.global_batch % n:
        raise SystemExit(f"--global-batch {args.global_batch} is not divisible by {n} processes")
    local = args.global_batch // n
    digits = data.load_digits()
    model, opt = make_model(), optim.adam(args.lr)
    params, state = model.init(random.PRNGKey(rank), fnp.asarray(digits.x_train[:1]))
    params = fg.distributed.broadcast(params)  # process 0's initialization everywhere
    opt_state = opt.init(params)
    parallel_step, single_step = make_steps(model, state, opt, mesh)

    start = time.perf_counter()
    my_part = lambda x, y: (x[rank * local:(rank + 1) * local], y[rank * local:(rank + 1) * local])
    dp_params, _, dp_losses = train(parallel_step, params, opt_state, digits,
                                    args.global_batch, args.epochs, my_part)
    seconds = time.perf_counter() - start
    fg.distributed.check_replicated(dp_params, "params")  # bitwise the same on every process
    logits, _ = model.apply(dp_params, state, fnp.asarray(digits.x_test))
    accuracy = float(np.mean(np.asarray(fnp.argmax(logits, axis=-1)) == digits.y_test))
    if rank == 0:
        print(f"data-parallel: {n} process(es), {local} examples each per step, "
              f"{len(dp_losses)} steps in {seconds:.2f} s (compilation included); final loss "
              f"{dp_losses[-1]:.4f}, test accuracy {accuracy:.4f}; parameters identical on "
              f"all processes")
        single, _, single_losses = train(single_step, params, opt_state, digits,
                                         args.global_batch, args.epochs, lambda x, y: (x, y))
        diff, rel = max_differences(dp_params, single)
        loss_diff = max(abs(a - b) for a, b in zip(dp_losses, single_losses))
        print(f"vs one process on the full batches: max |param difference| {diff:.3g} "
              f"({rel:.3g} of the largest parameter), max |loss difference| {loss_diff:.3g}")
        report_curves(curves_path("data_parallel_digits", args.curves),
                      {"loss": {f"{n} process(es)": dp_losses, "one process": single_losses}},
                      title="data-parallel digits MLP")
        ok = rel < 1e-4
        print("MATCH (float32 rounding)" if ok else "MISMATCH")
        if not ok:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
