#!/usr/bin/env python3
"""bench/models.py MODEL WEIGHTS_DIR - NumPy's time for one forward pass of
examples/MODEL.tfg (mlp or cnn) on the benchmark batch (MODEL_xb.npy), best
of 5, float32 like tfvm. Prints "SECONDS ARGMAX_CHECKSUM". The convolution is
im2col + one matrix product, as an optimized CPU library would do it. Set
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS before running to pick the threads."""
import os
import sys
import time

import numpy as np


def load(d, name):
    return np.load(os.path.join(d, name + ".npy"))


def conv2d_same3(x, w, b):
    """3x3 convolution, padding 1, stride 1: im2col then one matrix product."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w 3 3
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * wd, c * 9)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)


def maxpool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def main():
    model, d = sys.argv[1], sys.argv[2]
    x = load(d, model + "_xb")
    if model == "mlp":
        w1, b1, w2, b2, w3, b3 = (load(d, "mlp_" + n) for n in ("w1", "b1", "w2", "b2", "w3", "b3"))

        def run():
            h = np.maximum(x @ w1 + b1, 0)
            h = np.maximum(h @ w2 + b2, 0)
            return h @ w3 + b3
    else:
        c1w, c1b, c2w, c2b, fw, fb = (load(d, "cnn_" + n) for n in ("c1w", "c1b", "c2w", "c2b", "fw", "fb"))

        def run():
            h = maxpool2(np.maximum(conv2d_same3(x, c1w, c1b), 0))
            h = maxpool2(np.maximum(conv2d_same3(h, c2w, c2b), 0))
            return h.reshape(h.shape[0], -1) @ fw + fb
    best = None
    for _ in range(5):
        t = time.perf_counter()
        out = run()
        t = time.perf_counter() - t
        best = t if best is None or t < best else best
    print(f"{best:.6f} {int(np.argmax(out, axis=1).sum())}")


if __name__ == "__main__":
    main()
