"""A model kept as a Python list of layer objects that the program mutates:
layers are inserted and removed and their activation attribute switched
while it trains its last layer; each change is a new trace that Terra falls
back on, merges and regenerates for."""
import numpy as np


class Dense:
    def __init__(self, W, act="tanh"):
        self.W, self.act = W, act

    def __call__(self, h):
        z = h @ self.W
        return np.tanh(z) if self.act == "tanh" else np.maximum(z, 0.0)


def step(model, x, target, lr):
    h = x
    for layer in model[:-1]:
        h = layer(h)
    out = h @ model[-1].W
    d = out - target
    model[-1].W = model[-1].W - lr * (h.T @ d) / x.shape[0]   # SGD on the last layer only
    return float((d * d).mean())


def run(step_fn, steps=100, seed=0, n=16, d=32):
    data = np.random.default_rng(seed)

    def dense(act="tanh"):
        return Dense((data.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32), act)
    model = [dense(), dense(), dense()]
    x = data.standard_normal((n, d)).astype(np.float32)
    target = data.standard_normal((n, d)).astype(np.float32)
    out = []
    for k in range(steps):
        if k == steps // 4:
            model.insert(1, dense("relu"))       # a new layer
        if k == steps // 2:
            model[0].act = "relu"                # a layer changes its activation
        if k == 3 * steps // 4:
            del model[1]                          # and the inserted layer goes again
        out.append(step_fn(model, x, target, np.float32(0.01)))
    return out + [np.asarray(model[-1].W)]


if __name__ == "__main__":
    import tfvm
    print(run(tfvm.terra(step))[-2], run(step)[-2])
