"""DropBlock-style regularization: each step, Python's `random` draws which
blocks of hidden units to drop, and the model object's keep probability is
changed by the training loop (Python object mutation). The NumPy work (two
layers, the masked activations, the loss) is traced; the mask is a Python
value that is fed to the graph each step."""
import random

import numpy as np


class DropBlock:
    def __init__(self, keep_prob, block):
        self.keep_prob, self.block = keep_prob, block

    def mask(self, rows, cols, rng):
        """A 0/1 mask over hidden units, whole blocks of columns dropped."""
        m = np.ones((rows, cols), dtype=np.float32)
        gamma = (1.0 - self.keep_prob) / self.block
        for j in range(0, cols - self.block + 1):
            if rng.random() < gamma:
                m[:, j:j + self.block] = 0.0
        return m / np.float32(self.keep_prob)


def step(x, W1, W2, drop, rng):
    h = np.tanh(x @ W1)
    h = h * drop.mask(h.shape[0], h.shape[1], rng)
    y = np.tanh(h @ W2)
    return float((y * y).mean())


def run(step_fn, steps=100, seed=0, n=16, d=32, h=64):
    rng = random.Random(seed)
    data = np.random.default_rng(seed)
    W1 = (data.standard_normal((d, h)) * 0.2).astype(np.float32)
    W2 = (data.standard_normal((h, d)) * 0.2).astype(np.float32)
    x = data.standard_normal((n, d)).astype(np.float32)
    drop = DropBlock(0.95, 3)
    out = []
    for k in range(steps):
        drop.keep_prob = 0.95 - 0.1 * k / steps     # the schedule mutates the layer object
        out.append(step_fn(x, W1, W2, drop, rng))
    return out


if __name__ == "__main__":
    import tfvm
    print(run(tfvm.terra(step))[-3:], run(step)[-3:])
