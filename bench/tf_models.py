#!/usr/bin/env python3
"""bench/tf_models.py — the TensorFlow graphs of `make bench` (bench/tf.sh) and
TensorFlow's and CPython's times on them. Runs inside build/bench-venv
(tensorflow-cpu, numpy). Each model is one Python function of tensors, traced
twice: into a TF v1 graph (v1 control flow: Enter/Merge/Switch/NextIteration/
Exit), frozen to NAME.pb, and into a tf.function, frozen to NAME_v2.pb (v2
control flow: While/StatelessIf and a function library).

  tf_models.py build DIR          write NAME.pb, NAME_v2.pb, the inputs NAME.in<k>.npy,
                                  NAME.args (tfvm's arguments, Placeholder order),
                                  NAME.iters, the NumPy reference NAME.ref.npy, and
                                  the recursive fib.pb / ack.pb (a FunctionDef that
                                  calls itself); prints the model names
  tf_models.py time DIR T R W NAME...
                                  per NAME: the median of R runs after W warm-up runs
                                  of a v1 Session on NAME.pb and of the tf.function,
                                  intra-op threads T, inter-op 1; prints
                                  "NAME SESSION_S FUNCTION_S"; writes NAME.tf.npy and
                                  fails if TF disagrees with NumPy
  tf_models.py py fib N | ack M N the same recursion in plain CPython: median of 3,
                                  prints "SECONDS RESULT"
  tf_models.py tfrec PB ARG...    TF's own Session on a recursive GraphDef: "SECONDS RESULT"
  tf_models.py same A.npy B.npy   equal dtype and shape, values within 1e-5 relative
                                  (absolute near zero: 1e-5 of the largest magnitude)
"""
import os
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def rng():
    return np.random.default_rng(20261125)


# ---- the models: (inputs as {placeholder name: array}, function of tensors, reference, iterations)


def scalar_loop(tf):
    """100k iterations: an i64 counter and an accumulator (acc += i)."""
    n = 100000

    def f(n):
        _, a = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + i),
                             (tf.constant(0, tf.int64), tf.constant(0, tf.int64)))
        return a
    return {"n": np.int64(n)}, f, np.int64(n * (n - 1) // 2), n


def rnn(tf):
    """h = tanh(h @ W + x_t @ U + b), 1000 steps over [1,64]; x_t = gather(xs, i)."""
    steps = 1000
    r = rng()
    xs = r.standard_normal((steps, 1, 64), dtype=np.float32)
    h0 = np.zeros((1, 64), np.float32)
    w = (r.standard_normal((64, 64)) * 0.1).astype(np.float32)
    u = (r.standard_normal((64, 64)) * 0.1).astype(np.float32)
    b = (r.standard_normal(64) * 0.1).astype(np.float32)

    def f(xs, h0):
        W, U, B = tf.constant(w), tf.constant(u), tf.constant(b)

        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, W) + tf.matmul(tf.gather(xs, i), U) + B)
        _, h = tf.while_loop(lambda i, h: i < steps, body, (tf.constant(0), h0))
        return h
    h = h0
    for t in range(steps):
        h = np.tanh(h @ w + xs[t] @ u + b)
    return {"xs": xs, "h0": h0}, f, h, steps


def rnn_ta(tf):
    """The same RNN as tf.while_loop RNNs are written: the inputs unstacked into
    a TensorArray, every step's h written to another, stacked at the end
    ([1000,1,64]; TensorArrayV3 ops in the v1 graph, TensorList ops in v2)."""
    steps = 1000
    r = rng()
    xs = r.standard_normal((steps, 1, 64), dtype=np.float32)
    h0 = np.zeros((1, 64), np.float32)
    w = (r.standard_normal((64, 64)) * 0.1).astype(np.float32)
    u = (r.standard_normal((64, 64)) * 0.1).astype(np.float32)
    b = (r.standard_normal(64) * 0.1).astype(np.float32)

    def f(xs, h0):
        W, U, B = tf.constant(w), tf.constant(u), tf.constant(b)
        xa = tf.TensorArray(tf.float32, size=steps).unstack(xs)

        def body(i, h, ha):
            h2 = tf.tanh(tf.matmul(h, W) + tf.matmul(xa.read(i), U) + B)
            return i + 1, h2, ha.write(i, h2)
        _, _, ha = tf.while_loop(lambda i, h, ha: i < steps, body,
                                 (tf.constant(0), h0, tf.TensorArray(tf.float32, size=steps)))
        return ha.stack()
    h, hs = h0, []
    for t in range(steps):
        h = np.tanh(h @ w + xs[t] @ u + b)
        hs.append(h)
    return {"xs": xs, "h0": h0}, f, np.stack(hs), steps


def cond_in_loop(tf):
    """20000 iterations: acc += i if i % 3 == 0 else acc -= 1 (a cond in the body)."""
    n = 20000

    def f(n):
        def body(i, a):
            a2 = tf.cond(tf.equal(tf.math.floormod(i, 3), 0), lambda: a + i, lambda: a - 1)
            return i + 1, a2
        _, a = tf.while_loop(lambda i, a: i < n, body, (tf.constant(0, tf.int64), tf.constant(0, tf.int64)))
        return a
    acc = 0
    for i in range(n):
        acc = acc + i if i % 3 == 0 else acc - 1
    return {"n": np.int64(n)}, f, np.int64(acc), n


def nested_loops(tf):
    """300 x 300 iterations: acc += i * j + 1."""
    n = 300

    def f(n):
        def outer(i, a):
            _, a2 = tf.while_loop(lambda j, a: j < n, lambda j, a: (j + 1, a + i * j + 1),
                                  (tf.constant(0, tf.int64), a))
            return i + 1, a2
        _, a = tf.while_loop(lambda i, a: i < n, outer, (tf.constant(0, tf.int64), tf.constant(0, tf.int64)))
        return a
    s = n * (n - 1) // 2
    return {"n": np.int64(n)}, f, np.int64(s * s + n * n), n * n


def mlp(tf):
    """784-512-512-10, batch 64: MatMul + BiasAdd + Relu."""
    r = rng()
    x = r.standard_normal((64, 784), dtype=np.float32)
    ws = [(r.standard_normal(s) * 0.05).astype(np.float32) for s in ((784, 512), (512, 512), (512, 10))]
    bs = [(r.standard_normal(s) * 0.1).astype(np.float32) for s in (512, 512, 10)]

    def f(x):
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, tf.constant(ws[0])), tf.constant(bs[0])))
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(h, tf.constant(ws[1])), tf.constant(bs[1])))
        return tf.nn.bias_add(tf.matmul(h, tf.constant(ws[2])), tf.constant(bs[2]))
    h = np.maximum(x @ ws[0] + bs[0], 0)
    h = np.maximum(h @ ws[1] + bs[1], 0)
    return {"x": x}, f, h @ ws[2] + bs[2], 0


MODELS = {"scalar_loop": scalar_loop, "rnn": rnn, "rnn_ta": rnn_ta, "cond_in_loop": cond_in_loop,
          "nested_loops": nested_loops, "mlp": mlp}


def import_tf():
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    return tf


def spec(tf, x, name):
    return tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype), name=name)


def only(tf, gd, out):
    """The nodes `out` depends on: a loop's unused Exits and a cond's unused
    pivots go, so `out` is the graph's one unconsumed node (tfvm's default fetch)."""
    return tf.compat.v1.graph_util.extract_sub_graph(gd, [out])


def build_v2(tf, d, name, inputs, f):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    cf = tf.function(f).get_concrete_function(*(spec(tf, x, k) for k, x in inputs.items()))
    frozen = convert_variables_to_constants_v2(cf, lower_control_flow=False)  # keep While/If
    gd = frozen.graph.as_graph_def()
    out = frozen.outputs[0].name.split(":")[0]
    with open(os.path.join(d, name + "_v2.pb"), "wb") as fh:
        fh.write(only(tf, gd, out).SerializeToString())


def build_v1(tf, d, name, inputs, f):
    g = tf.Graph()
    with g.as_default():
        phs = [tf.compat.v1.placeholder(tf.as_dtype(np.asarray(x).dtype), np.shape(x), name=k)
               for k, x in inputs.items()]
        tf.identity(f(*phs), name="out")
    with open(os.path.join(d, name + ".pb"), "wb") as fh:
        fh.write(only(tf, g.as_graph_def(), "out").SerializeToString())


# ---- recursive functions, assembled as protos (TF cannot trace a tf.function that calls itself)


def recursive_graphs(tf, d):
    from tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, op_def_pb2, types_pb2

    I32 = types_pb2.DT_INT32

    def attr(**kw):
        out = {}
        for k, v in kw.items():
            if isinstance(v, str) and v.startswith("fn:"):
                out[k] = attr_value_pb2.AttrValue(func=attr_value_pb2.NameAttrList(name=v[3:]))
            elif isinstance(v, list):
                out[k] = attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(type=v))
            elif isinstance(v, (np.ndarray, np.generic)):
                out[k] = attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(v))
            else:
                out[k] = attr_value_pb2.AttrValue(type=v)
        return out

    def node(name, op, inputs, **kw):
        n = function_pb2.FunctionDef().node_def.add()
        n.name, n.op = name, op
        n.input.extend(inputs)
        for k, v in attr(**kw).items():
            n.attr[k].CopyFrom(v)
        return n

    def const(name, v):
        return node(name, "Const", [], value=np.int32(v), dtype=I32)

    def call(name, fn, args):
        return node(name, "PartitionedCall", args, f="fn:" + fn, Tin=[I32] * len(args), Tout=[I32])

    def iff(name, pred, args, then, other):
        return node(name, "StatelessIf", [pred] + args, then_branch="fn:" + then, else_branch="fn:" + other,
                    Tcond=types_pb2.DT_BOOL, Tin=[I32] * len(args), Tout=[I32])

    def fdef(name, params, nodes, ret):
        f = function_pb2.FunctionDef()
        f.signature.name = name
        for p in params:
            f.signature.input_arg.add(name=p, type=I32)
        f.signature.output_arg.add(name="r", type=I32)
        f.node_def.extend(nodes)
        f.ret["r"] = ret
        return f

    lib = {
        # fib(n) = 1 if n < 2 else fib(n - 1) + fib(n - 2)
        "fib": [
            fdef("fib", ["n"], [const("two", 2), node("lt", "Less", ["n", "two:output:0"], T=I32),
                                iff("if", "lt:z:0", ["n"], "fib_base", "fib_rec")], "if:output:0"),
            fdef("fib_base", ["n"], [const("one", 1)], "one:output:0"),
            fdef("fib_rec", ["n"], [
                const("one", 1), const("two", 2),
                node("n1", "Sub", ["n", "one:output:0"], T=I32), node("n2", "Sub", ["n", "two:output:0"], T=I32),
                call("f1", "fib", ["n1:z:0"]), call("f2", "fib", ["n2:z:0"]),
                node("s", "AddV2", ["f1:output:0", "f2:output:0"], T=I32)], "s:z:0"),
        ],
        # ack(m, n) = n + 1 if m == 0, ack(m - 1, 1) if n == 0, else ack(m - 1, ack(m, n - 1))
        "ack": [
            fdef("ack", ["m", "n"], [const("zero", 0), node("m0", "Equal", ["m", "zero:output:0"], T=I32),
                                     iff("if", "m0:z:0", ["m", "n"], "ack_m0", "ack_m")], "if:output:0"),
            fdef("ack_m0", ["m", "n"], [const("one", 1), node("r", "AddV2", ["n", "one:output:0"], T=I32)], "r:z:0"),
            fdef("ack_m", ["m", "n"], [const("zero", 0), node("n0", "Equal", ["n", "zero:output:0"], T=I32),
                                       iff("if", "n0:z:0", ["m", "n"], "ack_n0", "ack_mn")], "if:output:0"),
            fdef("ack_n0", ["m", "n"], [const("one", 1), node("m1", "Sub", ["m", "one:output:0"], T=I32),
                                        call("a", "ack", ["m1:z:0", "one:output:0"])], "a:output:0"),
            fdef("ack_mn", ["m", "n"], [
                const("one", 1), node("m1", "Sub", ["m", "one:output:0"], T=I32),
                node("n1", "Sub", ["n", "one:output:0"], T=I32), call("inner", "ack", ["m", "n1:z:0"]),
                call("a", "ack", ["m1:z:0", "inner:output:0"])], "a:output:0"),
        ],
    }
    for name, fns in lib.items():
        params = [a.name for a in fns[0].signature.input_arg]
        g = graph_pb2.GraphDef()
        g.versions.producer = 1882  # any producer TF accepts; v2 control flow ops need >= 27
        for p in params:
            ph = g.node.add(name=p, op="Placeholder")
            ph.attr["dtype"].type = I32
            ph.attr["shape"].shape.SetInParent()
        c = g.node.add(name="call", op="PartitionedCall", input=params)
        for k, v in attr(f="fn:" + name, Tin=[I32] * len(params), Tout=[I32]).items():
            c.attr[k].CopyFrom(v)
        o = g.node.add(name="out", op="Identity", input=["call"])
        o.attr["T"].type = I32
        g.library.function.extend(fns)
        with open(os.path.join(d, name + ".pb"), "wb") as fh:
            fh.write(g.SerializeToString())


def build(d):
    tf = import_tf()
    made = {}
    for name, make in MODELS.items():
        inputs, f, ref, iters = make(tf)
        build_v2(tf, d, name, inputs, f)  # before v1 control flow is switched on below
        made[name] = (inputs, f, ref, iters)
    tf.compat.v1.disable_control_flow_v2()
    for name, (inputs, f, ref, iters) in made.items():
        build_v1(tf, d, name, inputs, f)
        args = []
        for k, (ph, x) in enumerate(inputs.items()):
            path = os.path.join(d, f"{name}.in{k}.npy")
            np.save(path, x)
            # tfvm takes a rank-0 input as a literal and a tensor as @file.npy
            args.append(str(x.item()) if np.ndim(x) == 0 else "@" + path)
        with open(os.path.join(d, name + ".args"), "w") as fh:
            fh.write(" ".join(args) + "\n")
        with open(os.path.join(d, name + ".iters"), "w") as fh:
            fh.write(f"{iters}\n")
        np.save(os.path.join(d, name + ".ref.npy"), ref)
        print(name)
    recursive_graphs(tf, d)


def same(a, b):
    """None when b matches a, else why not."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{b.dtype}{list(b.shape)} where {a.dtype}{list(a.shape)} was expected"
    if a.dtype.kind in "fc":  # 1e-5 relative, and 1e-5 of the largest value near zero
        bad = ~np.isclose(b, a, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(a).max(initial=0))))
    else:
        bad = a != b
    if bad.any():
        k = np.flatnonzero(bad)[0]
        return f"{int(bad.sum())} of {a.size} values differ, first at {k}: {b.flat[k]} where {a.flat[k]} was expected"
    return None


def median_time(fn, runs, warmup):
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def time_tf(d, threads, runs, warmup, names):
    tf = import_tf()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    for name in names:
        inputs, f, _, _ = MODELS[name](tf)
        ref = np.load(os.path.join(d, name + ".ref.npy"))
        gd = tf.compat.v1.GraphDef()
        with open(os.path.join(d, name + ".pb"), "rb") as fh:
            gd.ParseFromString(fh.read())
        g = tf.Graph()
        with g.as_default():
            tf.graph_util.import_graph_def(gd, name="")
        cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=1)
        with tf.compat.v1.Session(graph=g, config=cfg) as sess:
            feeds = {k + ":0": x for k, x in inputs.items()}
            ts, out = median_time(lambda: sess.run("out:0", feeds), runs, warmup)
        np.save(os.path.join(d, name + ".tf.npy"), np.asarray(out))
        why = same(ref, out)
        if why:
            sys.exit(f"bench: {name}: TF v1 Session disagrees with NumPy: {why}")
        fn = tf.function(f)
        args = [tf.constant(x) for x in inputs.values()]
        tfn, out = median_time(lambda: fn(*args), runs, warmup)
        why = same(ref, out.numpy())
        if why:
            sys.exit(f"bench: {name}: tf.function disagrees with NumPy: {why}")
        print(f"{name} {ts:.6f} {tfn:.6f}", flush=True)


def tf_recursive(pb, args):
    """TF's own try at a recursive GraphDef (Session, fetching the one unconsumed node)."""
    tf = import_tf()
    gd = tf.compat.v1.GraphDef()
    with open(pb, "rb") as fh:
        gd.ParseFromString(fh.read())
    used = {i.lstrip("^").split(":")[0] for n in gd.node for i in n.input}
    sink = [n.name for n in gd.node if n.name not in used][0]
    phs = [n.name + ":0" for n in gd.node if n.op == "Placeholder"]
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    with tf.compat.v1.Session(graph=g) as sess:
        t = time.perf_counter()
        r = sess.run(sink + ":0", dict(zip(phs, (np.int32(a) for a in args))))
        print(f"{time.perf_counter() - t:.6f} {r}")


def fib(n):
    """The thesis's convention (bench/thesis.py, the TF fixtures): fib(25) = 121393."""
    return 1 if n < 2 else fib(n - 1) + fib(n - 2)


def ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))


def time_py(fn, args):
    sys.setrecursionlimit(100000)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        r = fn(*args)
        times.append(time.perf_counter() - t)
    print(f"{statistics.median(times):.6f} {r}")


def main():
    a = sys.argv[1:]
    if a[:1] == ["build"] and len(a) == 2:
        build(a[1])
    elif a[:1] == ["time"] and len(a) >= 6:
        time_tf(a[1], int(a[2]), int(a[3]), int(a[4]), a[5:])
    elif a[:2] == ["py", "fib"] and len(a) == 3:
        time_py(fib, [int(a[2])])
    elif a[:2] == ["py", "ack"] and len(a) == 4:
        time_py(ack, [int(a[2]), int(a[3])])
    elif a[:1] == ["tfrec"] and len(a) >= 2:
        tf_recursive(a[1], [int(x) for x in a[2:]])
    elif a[:1] == ["same"] and len(a) == 3:
        why = same(np.load(a[1]), np.load(a[2]))
        if why:
            print(why)
            sys.exit(1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
