"""A small residual CNN (Conv2d + BatchNorm + Residual blocks + max pooling) on the 8x8 digits,
trained with random-crop augmentation from `funcgrad.data`.

    pip install funcgrad[examples]
    python examples/train_digits_cnn.py [--epochs 15] [--batch-size 64] [--width 32]
        [--curves PATH]

Shows BatchNorm state threaded through a jitted training step (`has_aux`), AdamW with no
weight decay on biases and BatchNorm parameters (a mask by parameter path), a warm-up +
cosine learning-rate schedule read back from the optimizer state, and host-side
augmentation (`RandomCrop` with padding). Reaches about 98-99% test accuracy. The loss and
test-accuracy curves go to `examples/out/` as a PNG (matplotlib) or a one-line summary.
"""

import argparse
import time

import numpy as np
from _curves import curves_path, report_curves
from train_digits_mlp import blas_threads

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import data, nn, optim, random


def conv_bn_relu(channels):
    return [nn.Conv2d(channels, 3, use_bias=False), nn.BatchNorm(), nn.ReLU()]


def residual_block(channels):
    inner = nn.Sequential(*conv_bn_relu(channels), nn.Conv2d(channels, 3, use_bias=False),
                          nn.BatchNorm())
    return [nn.Residual(inner), nn.ReLU()]


def make_model(width=32):
    return nn.Sequential(
        *conv_bn_relu(width), *residual_block(width), nn.MaxPool2d(2),          # 8x8 -> 4x4
        *conv_bn_relu(2 * width), *residual_block(2 * width), nn.MaxPool2d(2),  # 4x4 -> 2x2
        nn.Flatten(), nn.Linear(10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--width", type=int, default=32, help="channels of the first stage")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", type=int, default=1, help="0: the BLAS default")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--curves", default=None, help='PNG path ("" for none)')
    args = parser.parse_args()

    digits = data.load_digits(images=True)  # (N, 1, 8, 8) in [0, 1]
    mean, std = digits.x_train.mean(), digits.x_train.std()
    augment = data.Compose([data.RandomCrop(8, padding=1), data.Normalize(mean, std)])
    loader = data.DataLoader((digits.x_train, digits.y_train), args.batch_size, shuffle=True,
                             seed=args.seed, drop_last=True, transform=augment,
                             progress=not args.no_progress)

    model = make_model(args.width)
    key = random.PRNGKey(args.seed)
    params, model_state = model.init(key, fnp.asarray(digits.x_train[:1]))
    steps = args.epochs * len(loader)
    schedule = optim.warmup_cosine_decay_schedule(0.0, args.lr, len(loader), steps)
    opt = optim.adamw(schedule, weight_decay=1e-4, mask="**/w")  # conv and linear kernels
    opt_state = opt.init(params)

    def loss_fn(params, model_state, x, y):
        logits, model_state = model.apply(params, model_state, x, train=True)
        return nn.softmax_cross_entropy(logits, nn.one_hot(y, 10)).mean(), model_state

    @fg.jit
    def train_step(params, model_state, opt_state, x, y):
        (loss, model_state), grads = fg.value_and_grad(loss_fn, has_aux=True)(
            params, model_state, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), model_state, opt_state, loss

    @fg.jit
    def predict(params, model_state, x):
        return fnp.argmax(model.apply(params, model_state, x)[0], axis=-1)

    x_test = fnp.asarray((digits.x_test - mean) / std)
    print(nn.summary(params))
    with blas_threads(args.blas_threads):
        start, epoch_losses, accs = time.perf_counter(), [], []
        for epoch in range(args.epochs):
            t0 = time.perf_counter()
            losses = []
            for x, y in loader:
                params, model_state, opt_state, loss = train_step(params, model_state,
                                                                  opt_state, x, y)
                losses.append(loss)
            acc = np.mean(np.asarray(predict(params, model_state, x_test)) == digits.y_test)
            epoch_losses.append(float(np.mean([float(v) for v in losses])))
            accs.append(float(acc))
            print(f"epoch {epoch + 1:2d}  loss {epoch_losses[-1]:.4f}  "
                  f"lr {float(optim.current_lr(opt_state)):.2e}  test acc {acc:.4f}  "
                  f"{time.perf_counter() - t0:.2f} s")
        seconds = time.perf_counter() - start
    print(f"training: {seconds:.1f} s for {args.epochs} epochs "
          f"({seconds / args.epochs:.2f} s per epoch, compilation included)")
    print(f"test accuracy: {acc:.4f}")
    report_curves(curves_path("train_digits_cnn", args.curves),
                  {"loss": {"train": epoch_losses}, "accuracy": {"test": accs}},
                  title=f"digits CNN, width {args.width}", xlabel="epoch")


if __name__ == "__main__":
    main()
