"""An MLP trained with hand-written backward passes and SGD: the parameters
live in a Python dict that each step replaces; the loss is logged (fetched)
every `log_every` steps only."""
import numpy as np


def step(params, x, y, lr, it, log, log_every):
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    h = np.tanh(x @ W1 + b1)
    out = h @ W2 + b2
    d = out - y
    loss = (d * d).mean()
    g = d * (2.0 / d.size)
    dW2, db2 = h.T @ g, g.sum(axis=0)
    dz = (g @ W2.T) * (1.0 - h * h)
    dW1, db1 = x.T @ dz, dz.sum(axis=0)
    params["W1"], params["b1"] = W1 - lr * dW1, b1 - lr * db1
    params["W2"], params["b2"] = W2 - lr * dW2, b2 - lr * db2
    if it % log_every == 0:
        log.append((it, float(loss)))


def run(step_fn, steps=100, seed=0, n=32, d=16, hidden=32, log_every=10):
    data = np.random.default_rng(seed)
    params = {"W1": (data.standard_normal((d, hidden)) * 0.3).astype(np.float32),
              "b1": np.zeros(hidden, np.float32),
              "W2": (data.standard_normal((hidden, 1)) * 0.3).astype(np.float32),
              "b2": np.zeros(1, np.float32)}
    true_w = data.standard_normal((d, 1)).astype(np.float32)
    log = []
    for it in range(steps):
        x = data.standard_normal((n, d)).astype(np.float32)
        step_fn(params, x, np.sin(x @ true_w), np.float32(0.05), it, log, log_every)
    return log + [np.asarray(params[k]) for k in ("W1", "b1", "W2", "b2")]


if __name__ == "__main__":
    import tfvm
    print(run(tfvm.terra(step))[-1], run(step)[-1])
