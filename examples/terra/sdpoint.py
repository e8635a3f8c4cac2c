"""SDPoint-style stochastic downsampling: each step Python picks at random
the layer after which the activations are downsampled (rows averaged in
pairs), so the traces diverge and merge again: the TraceGraph gets one
branch per point, and the generated graph selects the case each step."""
import random

import numpy as np


def downsample(h):
    return h.reshape(h.shape[0] // 2, 2, h.shape[1]).mean(axis=1)


def step(x, layers, rng):
    point = rng.randrange(len(layers) + 1)       # len(layers): no downsampling
    h = x
    for i, W in enumerate(layers):
        h = np.tanh(h @ W)
        if i == point:
            h = downsample(h)
    return float(h.mean()), h.shape[0]


def run(step_fn, steps=100, seed=0, n=32, d=32, depth=3):
    rng = random.Random(seed)
    data = np.random.default_rng(seed)
    layers = [(data.standard_normal((d, d)) * 0.3).astype(np.float32) for _ in range(depth)]
    x = data.standard_normal((n, d)).astype(np.float32)
    return [step_fn(x, layers, rng) for _ in range(steps)]


if __name__ == "__main__":
    import tfvm
    print(run(tfvm.terra(step))[-3:], run(step)[-3:])
