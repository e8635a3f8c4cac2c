#!/usr/bin/env python3
"""bench/onnx_models.py — the ONNX models of `make bench` (bench/onnx.sh),
built here with the onnx helper API (nothing is downloaded), and ONNX
Runtime's time on them. Runs inside build/bench-venv (onnx, onnxruntime, numpy).

  onnx_models.py build DIR        write DIR/NAME.onnx, its inputs NAME.in<k>.npy,
                                  NAME.args (tfvm's arguments), NAME.iters (loop
                                  iterations, 0 for none) and the NumPy reference
                                  NAME.ref.npy; prints the model names
  onnx_models.py ort DIR NAME T R W
                                  ORT with intra_op_num_threads=T, inter_op 1:
                                  W warm-up runs, then the median of R runs of
                                  InferenceSession.run; prints "SECONDS"; writes
                                  NAME.ort.npy and fails if it differs from NAME.ref.npy
  onnx_models.py same A.npy B.npy equal dtype and shape, values within 1e-4
                                  relative (+1e-5 absolute); prints why not
"""
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # a widely used opset: every op here is unchanged in it since long before
I64 = TensorProto.INT64
F32 = TensorProto.FLOAT
BOOL = TensorProto.BOOL


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def scalar_node(out, value):
    """A Constant node inside a subgraph (a body cannot own initializers portably)."""
    return helper.make_node("Constant", [], [out], value=numpy_helper.from_array(np.asarray(value), out))


def model(graph):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tfvm-bench")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def rng():
    return np.random.default_rng(20261125)


def mlp():
    """784-512-512-10, batch 64: Gemm+Relu, MatMul+Add+Relu, Gemm."""
    r = rng()
    x = r.standard_normal((64, 784), dtype=np.float32)
    w1 = (r.standard_normal((784, 512)) * 0.05).astype(np.float32)
    b1 = (r.standard_normal(512) * 0.1).astype(np.float32)
    w2 = (r.standard_normal((512, 512)) * 0.05).astype(np.float32)
    b2 = (r.standard_normal(512) * 0.1).astype(np.float32)
    w3 = (r.standard_normal((10, 512)) * 0.05).astype(np.float32)  # transposed: Gemm transB=1
    b3 = (r.standard_normal(10) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["g1"]),
        helper.make_node("Relu", ["g1"], ["h1"]),
        helper.make_node("MatMul", ["h1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["h2"]),
        helper.make_node("Gemm", ["h2", "w3", "b3"], ["y"], transB=1),
    ]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F32, [64, 784])],
                          [helper.make_tensor_value_info("y", F32, [64, 10])],
                          [const(n, v) for n, v in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2),
                                                    ("w3", w3), ("b3", b3))])
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    return model(g), [x], h @ w3.T + b3, 0


def conv3x3(x, w, b):
    """NCHW 3x3 convolution, padding 1 (im2col + one product)."""
    n, c, hh, ww = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * hh * ww, c * 9)
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.reshape(n, hh, ww, -1).transpose(0, 3, 1, 2)


def pool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def cnn():
    """Batch 16 of 1x28x28: 2x (conv3x3 pad 1 + Relu + MaxPool 2), Flatten, Gemm to 10."""
    r = rng()
    x = r.standard_normal((16, 1, 28, 28), dtype=np.float32)
    c1w = (r.standard_normal((16, 1, 3, 3)) * 0.3).astype(np.float32)
    c1b = (r.standard_normal(16) * 0.1).astype(np.float32)
    c2w = (r.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    c2b = (r.standard_normal(32) * 0.1).astype(np.float32)
    fw = (r.standard_normal((32 * 7 * 7, 10)) * 0.03).astype(np.float32)
    fb = (r.standard_normal(10) * 0.1).astype(np.float32)
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], **conv),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], **pool),
        helper.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], **conv),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], **pool),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"]),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", F32, [16, 1, 28, 28])],
                          [helper.make_tensor_value_info("y", F32, [16, 10])],
                          [const(n, v) for n, v in (("c1w", c1w), ("c1b", c1b), ("c2w", c2w), ("c2b", c2b),
                                                    ("fw", fw), ("fb", fb))])
    h = pool2(np.maximum(conv3x3(x, c1w, c1b), 0))
    h = pool2(np.maximum(conv3x3(h, c2w, c2b), 0))
    return model(g), [x], h.reshape(16, -1) @ fw + fb, 0


def rnn():
    """h = tanh(h @ W + x_t @ U + b) for 1000 steps over [1,64]; x_t = Gather(xs, iteration)
    reads the outer input from the body; no scan outputs."""
    steps = 1000
    r = rng()
    xs = r.standard_normal((steps, 1, 64), dtype=np.float32)
    h0 = np.zeros((1, 64), np.float32)
    w = (r.standard_normal((64, 64)) * 0.1).astype(np.float32)
    u = (r.standard_normal((64, 64)) * 0.1).astype(np.float32)
    b = (r.standard_normal(64) * 0.1).astype(np.float32)
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["xs", "i"], ["xt"], axis=0),
            helper.make_node("MatMul", ["h", "W"], ["hw"]),
            helper.make_node("MatMul", ["xt", "U"], ["xu"]),
            helper.make_node("Add", ["hw", "xu"], ["s"]),
            helper.make_node("Add", ["s", "b"], ["sb"]),
            helper.make_node("Tanh", ["sb"], ["h2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "rnn_body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", BOOL, []),
         helper.make_tensor_value_info("h", F32, [1, 64])],
        [helper.make_tensor_value_info("c2", BOOL, []), helper.make_tensor_value_info("h2", F32, [1, 64])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["steps", "true", "h0"], ["h"], body=body)],
        "rnn",
        [helper.make_tensor_value_info("xs", F32, [steps, 1, 64]), helper.make_tensor_value_info("h0", F32, [1, 64])],
        [helper.make_tensor_value_info("h", F32, [1, 64])],
        [const("steps", np.int64(steps)), const("true", np.bool_(True)), const("W", w), const("U", u),
         const("b", b)],
    )
    h = h0
    for t in range(steps):
        h = np.tanh(h @ w + xs[t] @ u + b)
    return model(g), [xs, h0], h, steps


def scalar_loop():
    """n iterations of (k, acc) = (k + 1, acc + k): an i64 counter and an accumulator
    carried by the loop (as TF's while loop and examples/sum_loop.tfg do)."""
    n = 100000
    body = helper.make_graph(
        [
            scalar_node("one", np.int64(1)),
            helper.make_node("Add", ["k", "one"], ["k2"]),
            helper.make_node("Add", ["acc", "k"], ["acc2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "sum_body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", BOOL, []),
         helper.make_tensor_value_info("k", I64, []), helper.make_tensor_value_info("acc", I64, [])],
        [helper.make_tensor_value_info("c2", BOOL, []), helper.make_tensor_value_info("k2", I64, []),
         helper.make_tensor_value_info("acc2", I64, [])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "true", "zero", "zero"], ["k", "acc"], body=body)],
        "scalar_loop",
        [helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("acc", I64, [])],
        [const("true", np.bool_(True)), const("zero", np.int64(0))],
    )
    return model(g), [np.int64(n)], np.int64(n * (n - 1) // 2), n


def if_in_loop():
    """20000 iterations: acc += i if i % 3 == 0 else acc -= 1; the branches read the
    body's values (i, acc) from the enclosing scope."""
    n = 20000
    then_g = helper.make_graph([helper.make_node("Add", ["acc", "i"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", I64, [])])
    else_g = helper.make_graph([scalar_node("one", np.int64(1)), helper.make_node("Sub", ["acc", "one"], ["e"])],
                               "else", [], [helper.make_tensor_value_info("e", I64, [])])
    body = helper.make_graph(
        [
            scalar_node("three", np.int64(3)),
            scalar_node("izero", np.int64(0)),
            helper.make_node("Mod", ["i", "three"], ["m"]),
            helper.make_node("Equal", ["m", "izero"], ["p"]),
            helper.make_node("If", ["p"], ["acc2"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "if_body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", BOOL, []),
         helper.make_tensor_value_info("acc", I64, [])],
        [helper.make_tensor_value_info("c2", BOOL, []), helper.make_tensor_value_info("acc2", I64, [])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "true", "zero"], ["acc"], body=body)],
        "if_in_loop",
        [helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("acc", I64, [])],
        [const("true", np.bool_(True)), const("zero", np.int64(0))],
    )
    acc = 0
    for i in range(n):
        acc = acc + i if i % 3 == 0 else acc - 1
    return model(g), [np.int64(n)], np.int64(acc), n


def loop_in_loop():
    """300 x 300 iterations: acc += i * j + 1, the inner trip count read from the graph input."""
    n = 300
    inner = helper.make_graph(
        [
            scalar_node("one", np.int64(1)),
            helper.make_node("Mul", ["i", "j"], ["ij"]),
            helper.make_node("Add", ["ij", "one"], ["ij1"]),
            helper.make_node("Add", ["a", "ij1"], ["a2"]),
            helper.make_node("Identity", ["cj"], ["cj2"]),
        ],
        "inner",
        [helper.make_tensor_value_info("j", I64, []), helper.make_tensor_value_info("cj", BOOL, []),
         helper.make_tensor_value_info("a", I64, [])],
        [helper.make_tensor_value_info("cj2", BOOL, []), helper.make_tensor_value_info("a2", I64, [])],
    )
    outer = helper.make_graph(
        [
            helper.make_node("Loop", ["n", "ci", "acc"], ["acc2"], body=inner),
            helper.make_node("Identity", ["ci"], ["ci2"]),
        ],
        "outer",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("ci", BOOL, []),
         helper.make_tensor_value_info("acc", I64, [])],
        [helper.make_tensor_value_info("ci2", BOOL, []), helper.make_tensor_value_info("acc2", I64, [])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "true", "zero"], ["acc"], body=outer)],
        "loop_in_loop",
        [helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("acc", I64, [])],
        [const("true", np.bool_(True)), const("zero", np.int64(0))],
    )
    s = n * (n - 1) // 2
    return model(g), [np.int64(n)], np.int64(s * s + n * n), n * n


MODELS = {"mlp": mlp, "cnn": cnn, "rnn": rnn, "scalar_loop": scalar_loop, "if_in_loop": if_in_loop,
          "loop_in_loop": loop_in_loop}


def build(d):
    for name, make in MODELS.items():
        m, inputs, ref, iters = make()
        onnx.save(m, os.path.join(d, name + ".onnx"))
        args = []
        for k, x in enumerate(inputs):
            path = os.path.join(d, f"{name}.in{k}.npy")
            np.save(path, x)
            # tfvm takes a rank-0 input as a literal and a tensor as @file.npy
            args.append(str(x.item()) if np.ndim(x) == 0 else "@" + path)
        with open(os.path.join(d, name + ".args"), "w") as f:
            f.write(" ".join(args) + "\n")
        with open(os.path.join(d, name + ".iters"), "w") as f:
            f.write(f"{iters}\n")
        np.save(os.path.join(d, name + ".ref.npy"), ref)
        print(name)


def same(a, b):
    """None when b matches a, else why not."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{b.dtype}{list(b.shape)} where {a.dtype}{list(a.shape)} was expected"
    if a.dtype.kind in "fc":
        bad = ~np.isclose(b, a, rtol=1e-4, atol=1e-5)
    else:
        bad = a != b
    if bad.any():
        k = np.flatnonzero(bad)[0]
        return f"{int(bad.sum())} of {a.size} values differ, first at {k}: {b.flat[k]} where {a.flat[k]} was expected"
    return None


def ort(d, name, threads, runs, warmup):
    import onnxruntime as rt

    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
    sess = rt.InferenceSession(os.path.join(d, name + ".onnx"), so, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(os.path.join(d, f"{name}.in{k}.npy")) for k, i in enumerate(sess.get_inputs())}
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    np.save(os.path.join(d, name + ".ort.npy"), out[0])
    why = same(np.load(os.path.join(d, name + ".ref.npy")), out[0])
    if why:
        sys.exit(f"bench: {name}: ONNX Runtime disagrees with NumPy: {why}")
    print(f"{statistics.median(times):.6f}")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "build" and len(sys.argv) == 3:
        build(sys.argv[2])
    elif cmd == "ort" and len(sys.argv) == 7:
        ort(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "same" and len(sys.argv) == 4:
        why = same(np.load(sys.argv[2]), np.load(sys.argv[3]))
        if why:
            print(why)
            sys.exit(1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
