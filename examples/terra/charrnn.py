"""A character-level RNN sampling loop: each step the next character is
drawn by Python's `random` from the probabilities the graph computes
(fetched: materialization), its embedding row is fed back, and the hidden
states are collected in a sequence that grows by one row per character
(dynamic shapes). A sample ends at the end-of-text character or at `length`."""
import random

import numpy as np

EOS = 0


def sample_index(p, rng):
    r, acc = rng.random(), 0.0
    for i, pi in enumerate(p):
        acc += pi
        if r < acc:
            return i
    return len(p) - 1


def step(E, Wx, Wh, Wy, h0, rng, length):
    h, hs, tokens = h0, h0, [1]
    for _ in range(length):
        x = E[tokens[-1]:tokens[-1] + 1]                 # a Python-side row: fed
        h = np.tanh(x @ Wx + h @ Wh)
        hs = np.concatenate([hs, h], axis=0)             # grows by one row
        logits = h @ Wy
        e = np.exp(logits - logits.max())
        p = e / e.sum()
        tokens.append(sample_index(np.asarray(p)[0], rng))
        if tokens[-1] == EOS:
            break
    return tokens, float((hs * hs).mean())


def run(step_fn, steps=100, seed=0, vocab=12, hidden=32, length=8):
    rng = random.Random(seed)
    data = np.random.default_rng(seed)
    E = data.standard_normal((vocab, hidden))
    Wx = data.standard_normal((hidden, hidden)) * 0.3
    Wh = data.standard_normal((hidden, hidden)) * 0.3
    Wy = data.standard_normal((hidden, vocab))
    h0 = np.zeros((1, hidden))
    return [step_fn(E, Wx, Wh, Wy, h0, rng, length) for _ in range(steps)]


if __name__ == "__main__":
    import tfvm
    print(run(tfvm.terra(step))[-3:], run(step)[-3:])
