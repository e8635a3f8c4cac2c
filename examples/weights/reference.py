#!/usr/bin/env python3
"""examples/weights/reference.py - the example models in NumPy, for tfvm's checks.

Rebuilds the weights of examples/weights/mkweights.c (same counter-based hash,
same float32 rounding), runs examples/{mlp,cnn,rnn,treernn}.tfg in float64
NumPy, and writes what test/e2e/models.sh compares tfvm against:
  test/e2e/models/NAME_ref.npy   each model's output (float32)
  test/e2e/models/EXPECTED       each output rounded to 2 decimals, x100, as
                                 test/e2e/models/check.tfg prints it
  test/e2e/models/mat_a.npy, mat_b.npy   the inputs of examples/matmul.tfg's test
Run from the repository root; with a directory made by mkweights, also checks
that its files are bit for bit the ones rebuilt here:
  python3 examples/weights/reference.py [WEIGHTS_DIR]
"""
import os
import sys

import numpy as np

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix(z):
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def name_seed(name):
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def bits24(seed, k):
    k = np.asarray(k, dtype=np.uint64)
    return mix((np.uint64(seed) << np.uint64(32)) | k) >> np.uint64(40)


# name, kind, scale (the same decimal literals as mkweights.c), shape
SPECS = [
    ("mlp_w1", "sym", 0.0874818765, (784, 512)),
    ("mlp_b1", "sym", 0.1, (512,)),
    ("mlp_w2", "sym", 0.1082531755, (512, 512)),
    ("mlp_b2", "sym", 0.1, (512,)),
    ("mlp_w3", "sym", 0.1082531755, (512, 10)),
    ("mlp_b3", "sym", 0.1, (10,)),
    ("mlp_x", "unit", 1.0, (4, 784)),
    ("mlp_xb", "unit", 1.0, (256, 784)),
    ("cnn_c1w", "sym", 0.8164965809, (8, 1, 3, 3)),
    ("cnn_c1b", "sym", 0.1, (8,)),
    ("cnn_c2w", "sym", 0.2886751346, (16, 8, 3, 3)),
    ("cnn_c2b", "sym", 0.1, (16,)),
    ("cnn_fw", "sym", 0.0874818765, (784, 10)),
    ("cnn_fb", "sym", 0.1, (10,)),
    ("cnn_x", "unit", 1.0, (2, 1, 28, 28)),
    ("cnn_xb", "unit", 1.0, (64, 1, 28, 28)),
    ("rnn_wx", "sym", 0.25, (16, 32)),
    ("rnn_wh", "sym", 0.1767766953, (32, 32)),
    ("rnn_b", "sym", 0.1, (32,)),
    ("rnn_wo", "sym", 0.1767766953, (32, 4)),
    ("rnn_bo", "sym", 0.1, (4,)),
    ("rnn_xs", "sym", 1.0, (6, 3, 16)),
    ("tree_emb", "sym", 1.0, (20, 16)),
    ("tree_w", "sym", 0.1767766953, (32, 16)),
    ("tree_b", "sym", 0.1, (16,)),
    ("tree_wo", "sym", 0.25, (16, 4)),
    ("tree_bo", "sym", 0.1, (4,)),
]
TREE_LEAVES, TREE_WORDS = 9, 20


def tensor(name, kind, scale, shape):
    n = int(np.prod(shape))
    u = bits24(name_seed(name), np.arange(n, dtype=np.uint64)).astype(np.float64)
    v = u / 16777216.0 if kind == "unit" else (u / 8388608.0 - 1.0) * scale
    return v.astype(np.float32).reshape(shape)


def tree():
    seed = name_seed("tree")
    left, right, word = [], [], []

    def node(lo, hi):
        me = len(left)
        left.append(-1)
        right.append(-1)
        word.append(-1)
        if hi - lo == 1:
            word[me] = int(bits24(seed, lo)) % TREE_WORDS
            return me
        split = lo + 1 + int(bits24(seed, 1000 + lo * 100 + hi)) % (hi - lo - 1)
        left[me] = node(lo, split)
        right[me] = node(split, hi)
        return me

    node(0, TREE_LEAVES)
    return {k: np.array(v, dtype=np.int64) for k, v in (("tree_left", left), ("tree_right", right), ("tree_word", word))}


def conv2d(x, w, pad):
    """NCHW x, OIHW w, stride 1, zero padding `pad` on every side."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out


def maxpool2(x):
    n, c, h, w = x.shape
    return x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def relu(x):
    return np.maximum(x, 0)


def models(t):
    d = {k: v.astype(np.float64) for k, v in t.items() if v.dtype == np.float32}
    out = {}
    h = relu(d["mlp_x"] @ d["mlp_w1"] + d["mlp_b1"])
    h = relu(h @ d["mlp_w2"] + d["mlp_b2"])
    out["mlp"] = h @ d["mlp_w3"] + d["mlp_b3"]

    h = maxpool2(relu(conv2d(d["cnn_x"], d["cnn_c1w"], 1) + d["cnn_c1b"].reshape(1, 8, 1, 1)))
    h = maxpool2(relu(conv2d(h, d["cnn_c2w"], 1) + d["cnn_c2b"].reshape(1, 16, 1, 1)))
    out["cnn"] = h.reshape(h.shape[0], -1) @ d["cnn_fw"] + d["cnn_fb"]

    xs = d["rnn_xs"]
    h = np.tanh(xs[0] @ d["rnn_wx"] + d["rnn_b"])
    for s in range(1, xs.shape[0]):
        h = np.tanh(xs[s] @ d["rnn_wx"] + h @ d["rnn_wh"] + d["rnn_b"])
    out["rnn"] = h @ d["rnn_wo"] + d["rnn_bo"]

    left, right, word = t["tree_left"], t["tree_right"], t["tree_word"]

    def encode(i):
        if left[i] < 0:
            return d["tree_emb"][word[i]].reshape(1, 16)
        hc = np.concatenate([encode(left[i]), encode(right[i])], axis=1)
        return np.tanh(hc @ d["tree_w"] + d["tree_b"])

    out["treernn"] = encode(0) @ d["tree_wo"] + d["tree_bo"]
    return out


def rounded(a):
    """As test/e2e/models/check.tfg prints it: x100, rounded half away from zero."""
    a = a.astype(np.float32)
    r = np.trunc(a * np.float32(100) + np.where(a < 0, np.float32(-0.5), np.float32(0.5))).astype(np.int64)
    return "[" + ", ".join("[" + ", ".join(str(v) for v in row) + "]" for row in r) + "]"


def main():
    t = {name: tensor(name, kind, scale, shape) for name, kind, scale, shape in SPECS}
    t.update(tree())
    if len(sys.argv) > 1:
        for name, v in t.items():
            got = np.load(os.path.join(sys.argv[1], name + ".npy"))
            if got.dtype != v.dtype or got.shape != v.shape or got.tobytes() != v.tobytes():
                sys.exit(f"reference.py: {name}.npy differs from mkweights' file")
        print(f"reference.py: the {len(t)} files of {sys.argv[1]} match")
    outdir = "test/e2e/models"
    os.makedirs(outdir, exist_ok=True)
    lines = []
    for name, v in models(t).items():
        np.save(os.path.join(outdir, name + "_ref.npy"), v.astype(np.float32))
        lines.append(f"{name}\ttrue | {rounded(v)}")
    with open(os.path.join(outdir, "EXPECTED"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.save(os.path.join(outdir, "mat_a.npy"), np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32))
    np.save(os.path.join(outdir, "mat_b.npy"), np.array([[1, 0, -1, 2], [0, 1, 1, 0.5], [2, -1, 0, 1]], dtype=np.float32))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
