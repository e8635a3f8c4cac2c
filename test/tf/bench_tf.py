#!/usr/bin/env python3
"""test/tf/bench_tf.py - TensorFlow graphs on tfvm against TensorFlow itself, same run.

Builds each benchmark graph with TensorFlow, writes its frozen GraphDef to a
scratch folder, runs it with `tfvm run --stats` (the VM's own wall time of
the run, import excluded) and with TensorFlow (a v1 Session on the same
GraphDef, and the same computation as a tf.function), and prints one row per
graph with the ratios. Recursive fib and Ackermann GraphDefs (which TF cannot
run: its tracer has no recursion) are compared with the same functions in
CPython. Needs TensorFlow: run it with the venv test/tf/gen.py makes:

    build/tf-venv/bin/python test/tf/bench_tf.py [--tfvm build/bin/tfvm] [--threads 1]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
tf1 = tf.compat.v1
REPS = 3


def best(fn, reps=REPS):
    t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def tfvm_time(args, pb, inputs, outputs, tmp):
    """Best wall time of the run itself (tfvm --stats), seconds."""
    cmd = [args.tfvm, "run", "--stats", "--threads", str(args.threads), "--outputs", outputs, pb]
    for k, v in enumerate(inputs):
        if np.ndim(v) == 0:
            cmd.append(str(v.item() if hasattr(v, "item") else v).lower())
        else:
            path = os.path.join(tmp, "in%d.npy" % k)
            np.save(path, v)
            cmd.append("@" + path)
    t = 1e9
    for _ in range(REPS):
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("tfvm failed: %s" % out.stderr.strip())
        m = re.search(r"wall ([0-9.e-]+) s", out.stderr)
        t = min(t, float(m.group(1)))
    return t


def v1_graph(build):
    tf1.disable_control_flow_v2()
    g = tf1.Graph()
    with g.as_default():
        outs = build()
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
    tf1.enable_control_flow_v2()
    return g, outs


def session_time(g, outs, feeds):
    with tf1.Session(graph=g) as s:
        fd = {g.get_tensor_by_name(k + ":0"): v for k, v in feeds.items()}
        s.run(outs, fd)
        return best(lambda: s.run(outs, fd))


def row(name, unit, n, tv, t1=None, t2=None):
    def f(t):
        return "%9.3f" % (t / n * 1e6) if t is not None else "        -"

    def r(t):
        return "%7.3f" % (tv / t) if t is not None else "      -"
    print("%-26s %-10s %s %s %s   %s %s" % (name, unit, f(tv), f(t1), f(t2), r(t1), r(t2)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tfvm", default=os.environ.get("TFVM", "build/bin/tfvm"))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tfvm-bench-tf-")
    rng = np.random.default_rng(1)
    print("TensorFlow %s; tfvm --threads %d; times in us per unit, best of %d" % (tf.__version__, args.threads, REPS))
    print("%-26s %-10s %9s %9s %9s   %7s %7s" % ("graph", "unit", "tfvm", "TF v1", "tf.func", "/v1", "/func"))

    def save(g, name):
        path = os.path.join(tmp, name + ".pb")
        with open(path, "wb") as f:
            f.write(g.as_graph_def().SerializeToString())
        return path

    # 1. scalar while loop, 100k iterations
    N = 100000

    def loop():
        n = tf1.placeholder(tf.int32, [], "n")
        x = tf1.placeholder(tf.float32, [], "x")
        return list(tf1.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 0.5 + x), [0, 0.0]))
    g, outs = v1_graph(loop)
    pb = save(g, "loop")
    tv = tfvm_time(args, pb, [np.int32(N), np.float32(1.5)], ",".join(t.name for t in outs), tmp)
    t1 = session_time(g, outs, {"n": N, "x": 1.5})

    @tf.function
    def floop(n, x):
        return tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 0.5 + x), [0, 0.0])
    floop(tf.constant(10), tf.constant(1.5))
    t2 = best(lambda: floop(tf.constant(N), tf.constant(1.5)))
    row("while loop (v1 graph)", "iteration", N, tv, t1, t2)
    cf = floop.get_concrete_function(tf.TensorSpec([], tf.int32, name="n"), tf.TensorSpec([], tf.float32, name="x"))
    pb2 = os.path.join(tmp, "loop_v2.pb")
    with open(pb2, "wb") as f:
        f.write(cf.graph.as_graph_def().SerializeToString())
    tv2 = tfvm_time(args, pb2, [np.int32(N), np.float32(1.5)], ",".join(t.name for t in cf.outputs), tmp)
    row("while loop (tf.function)", "iteration", N, tv2, t1, t2)

    # 2. cond inside a loop
    def cond_loop():
        n = tf1.placeholder(tf.int32, [], "n")

        def body(i, s):
            return i + 1, s + tf1.cond(tf.equal(i % 3, 0), lambda: i * 2, lambda: -i)
        return list(tf1.while_loop(lambda i, s: i < n, body, [0, 0]))
    g, outs = v1_graph(cond_loop)
    tv = tfvm_time(args, save(g, "cond_loop"), [np.int32(N)], ",".join(t.name for t in outs), tmp)
    t1 = session_time(g, outs, {"n": N})
    row("cond in a loop", "iteration", N, tv, t1)

    # 3. nested loops, 300 x 300
    M = 300

    def nested():
        n = tf1.placeholder(tf.int32, [], "n")
        m = tf1.placeholder(tf.int32, [], "m")

        def outer(i, s):
            _, t = tf1.while_loop(lambda j, t: j < m, lambda j, t: (j + 1, t + i * j + 1), [0, s])
            return i + 1, t
        return list(tf1.while_loop(lambda i, s: i < n, outer, [0, 0]))
    g, outs = v1_graph(nested)
    tv = tfvm_time(args, save(g, "nested"), [np.int32(M), np.int32(M)], ",".join(t.name for t in outs), tmp)
    t1 = session_time(g, outs, {"n": M, "m": M})
    row("nested loops", "inner iter", M * M, tv, t1)

    # 4. RNN over TensorArrays, 2000 steps
    T, B, D, H = 2000, 1, 16, 16
    w = rng.standard_normal((D, H)).astype(np.float32) * 0.3
    u = rng.standard_normal((H, H)).astype(np.float32) * 0.3

    def rnn():
        x = tf1.placeholder(tf.float32, [T, B, D], "x")
        xs = tf1.TensorArray(tf.float32, size=T).unstack(x)
        hs = tf1.TensorArray(tf.float32, size=T)

        def body(t, h, hs):
            h = tf.tanh(tf.matmul(xs.read(t), w) + tf.matmul(h, u))
            return t + 1, h, hs.write(t, h)
        _, h, hs = tf1.while_loop(lambda t, h, hs: t < T, body, [0, tf.zeros([B, H]), hs])
        return [h, hs.stack()]
    g, outs = v1_graph(rnn)
    xv = rng.standard_normal((T, B, D)).astype(np.float32)
    tv = tfvm_time(args, save(g, "rnn"), [xv], ",".join(t.name for t in outs), tmp)
    t1 = session_time(g, outs, {"x": xv})
    row("RNN, TensorArray", "step", T, tv, t1)

    # 5. MLP inference, batch 64, 784-256-10
    w1 = rng.standard_normal((784, 256)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((256, 10)).astype(np.float32) * 0.05

    def mlp():
        x = tf1.placeholder(tf.float32, [64, 784], "x")
        return tf.nn.softmax(tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2))
    g, outs = v1_graph(mlp)
    xv = rng.standard_normal((64, 784)).astype(np.float32)
    tv = tfvm_time(args, save(g, "mlp"), [xv], ",".join(t.name for t in outs), tmp)
    t1 = session_time(g, outs, {"x": xv})
    row("MLP 784-256-10, batch 64", "inference", 1, tv, t1)

    # 6. recursion: the fixtures' fib and Ackermann GraphDefs against CPython
    fix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    sys.setrecursionlimit(100000)

    def pyfib(n):
        return 1 if n < 2 else pyfib(n - 1) + pyfib(n - 2)

    def pyack(m, n):
        if m == 0:
            return n + 1
        if n == 0:
            return pyack(m - 1, 1)
        return pyack(m - 1, pyack(m, n - 1))
    tv = tfvm_time(args, os.path.join(fix, "fib.pb"), [np.int32(25)], "y", tmp)
    tp = best(lambda: pyfib(25))
    calls = 2 * pyfib(25) - 1
    print("%-26s %-10s %9.3f   CPython %9.3f   ratio %.3f" % ("fib(25) GraphDef", "call", tv / calls * 1e6,
                                                           tp / calls * 1e6, tv / tp))
    tv = tfvm_time(args, os.path.join(fix, "ackermann.pb"), [np.int32(2), np.int32(300)], "call", tmp)
    tp = best(lambda: pyack(2, 300))
    print("%-26s %-10s %9.3f ms CPython %9.3f ms ratio %.3f" % ("ackermann(2, 300) GraphDef", "run", tv * 1e3,
                                                              tp * 1e3, tv / tp))


main()
