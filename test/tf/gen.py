#!/usr/bin/env python3
"""test/tf/gen.py - writes the TensorFlow fixtures of test/unit/test_tf.c.

Run by hand (never by make or CI): it makes build/tf-venv with tensorflow-cpu
and numpy from PyPI if that is missing, then writes, for every fixture NAME,
test/tf/fixtures/NAME.pb (a frozen binary GraphDef), NAME.inK.npy (the values
of the Placeholders, in the file's order), NAME.outK.npy (what TensorFlow
computed for the fetches) and one line of index.txt: NAME OUTPUTS N_IN N_OUT
(OUTPUTS = the fetches as `tfvm run --outputs` takes them, '-' = the default).
Naming fixtures writes only those (their index.txt lines replaced or added),
leaving the other files as they are.

    python3 test/tf/gen.py [NAME...]
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.path.join(ROOT, "build", "tf-venv")
OUT = os.path.join(ROOT, "test", "tf", "fixtures")

if os.environ.get("TFVM_GEN_IN_VENV") != "1":
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([py, "-m", "pip", "install", "-q", "tensorflow-cpu", "numpy"])
    env = dict(os.environ, TFVM_GEN_IN_VENV="1", TF_CPP_MIN_LOG_LEVEL="3")
    sys.exit(subprocess.call([py, os.path.abspath(__file__)] + sys.argv[1:], env=env))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import (attr_value_pb2, function_pb2, graph_pb2,  # noqa: E402
                                       node_def_pb2, op_def_pb2, types_pb2)

tf1 = tf.compat.v1
INDEX = []
ONLY = set(sys.argv[1:])
rng = np.random.default_rng(20260101)


def save(name, gd, inputs, outputs, expected, spec=None):
    """Writes NAME.pb (gd None: NAME is a SavedModel directory), its inputs
    (in Placeholder order) and expected outputs."""
    INDEX.append("%s %s %d %d" % (name, spec or "-", len(inputs), len(expected)))
    if ONLY and name not in ONLY:
        return
    if gd is not None:
        with open(os.path.join(OUT, name + ".pb"), "wb") as f:
            f.write(gd.SerializeToString())
    for k, v in enumerate(inputs):
        np.save(os.path.join(OUT, "%s.in%d.npy" % (name, k)), np.asarray(v))
    for k, v in enumerate(expected):
        np.save(os.path.join(OUT, "%s.out%d.npy" % (name, k)), np.asarray(v))
    size = len(gd.SerializeToString()) if gd is not None else 0
    print("%-16s %5d bytes, %d inputs, %d outputs" % (name, size, len(inputs), len(expected)))


def placeholders(gd):
    return [n.name for n in gd.node if n.op == "Placeholder"]


def v1(name, build, feeds, fetches=None):
    """Builds a graph with v1 control flow, runs it in a Session, saves it."""
    tf1.disable_control_flow_v2()
    g = tf1.Graph()
    with g.as_default():
        outs = build()
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
    gd = g.as_graph_def()
    phs = placeholders(gd)
    with tf1.Session(graph=g) as s:
        res = s.run(outs, {g.get_tensor_by_name(p + ":0"): feeds[p] for p in phs})
    spec = ",".join(t.name for t in outs)
    save(name, gd, [feeds[p] for p in phs], outs and res, res, spec)
    tf1.enable_control_flow_v2()


def ph(dtype, shape, name):
    return tf1.placeholder(dtype, shape, name=name)


# ---- v1 control flow ------------------------------------------------------------

def while_scalar():
    n = ph(tf.int32, [], "n")
    x = ph(tf.float32, [], "x")
    i, s = tf1.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 0.5 + x), [0, 0.0], parallel_iterations=32)
    return [i, s]


def cond_v1():
    p = ph(tf.bool, [], "p")
    x = ph(tf.float32, [3], "x")
    return tf1.cond(p, lambda: x * 2.0, lambda: x - 1.0)


def cond_v1_false():
    return cond_v1()


def cond_in_loop():
    n = ph(tf.int32, [], "n")

    def body(i, s):
        d = tf1.cond(tf.equal(i % 3, 0), lambda: i * 2, lambda: -i)
        return i + 1, s + d
    return list(tf1.while_loop(lambda i, s: i < n, body, [0, 0]))


def nested_loops():
    n = ph(tf.int32, [], "n")
    m = ph(tf.int32, [], "m")

    def outer(i, s):
        _, t = tf1.while_loop(lambda j, t: j < m, lambda j, t: (j + 1, t + i * j + 1), [0, s])
        return i + 1, t
    return list(tf1.while_loop(lambda i, s: i < n, outer, [0, 0]))


def invariant_cond_loop():
    """A cond inside a loop on loop-invariant values (hoisted out of the loop)."""
    n = ph(tf.int32, [], "n")
    flag = ph(tf.bool, [], "flag")
    x = ph(tf.float32, [2], "x")

    def body(i, s):
        d = tf1.cond(flag, lambda: x, lambda: -x)
        return i + 1, s + d
    return list(tf1.while_loop(lambda i, s: i < n, body, [0, tf.zeros([2])]))


def cond_nested():
    """Conds inside both branches of a cond; a branch returning a placeholder as is."""
    p = ph(tf.bool, [], "p")
    q = ph(tf.bool, [], "q")
    x = ph(tf.float32, [3], "x")
    y = ph(tf.float32, [3], "y")
    return [tf1.cond(p, lambda: tf1.cond(q, lambda: x * 3.0, lambda: y), lambda: tf1.cond(q, lambda: x, lambda: x - y)),
            tf1.cond(q, lambda: x, lambda: y)]


def loop_index():
    """x[i] with a loop variable (a StridedSlice with run-time begin and end), v1 row Select."""
    x = ph(tf.float32, [5, 3], "x")
    rows = ph(tf.bool, [5], "rows")

    def body(i, s):
        return i + 1, s + x[i, :2] * tf.cast(i, tf.float32) + x[-1 - i, 1:] + x[i][::2]
    i, s = tf1.while_loop(lambda i, s: i < 4, body, [0, tf.zeros([2])])
    return [s, tf1.where(rows, x, -x), x[:, -1]]


def loop_in_cond():
    """A v1 while loop inside each branch of a v1 cond."""
    p = ph(tf.bool, [], "p")
    n = ph(tf.int32, [], "n")
    x = ph(tf.float32, [], "x")

    def up():
        return tf1.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + x), [0, x])[1]

    def down():
        return tf1.while_loop(lambda i, s: i < n * 2, lambda i, s: (i + 1, s * 0.5), [0, x])[1]
    return tf1.cond(p, up, down)


def rnn_ta():
    x = ph(tf.float32, [5, 2, 3], "x")
    w = tf.constant(rng.standard_normal((3, 4)).astype(np.float32) * 0.5)
    u = tf.constant(rng.standard_normal((4, 4)).astype(np.float32) * 0.5)
    xs = tf1.TensorArray(tf.float32, size=5).unstack(x)
    hs = tf1.TensorArray(tf.float32, size=5)

    def body(t, h, hs):
        h = tf.tanh(tf.matmul(xs.read(t), w) + tf.matmul(h, u))
        return t + 1, h, hs.write(t, h)
    _, h, hs = tf1.while_loop(lambda t, h, hs: t < 5, body, [0, tf.zeros([2, 4]), hs])
    return [h, hs.stack(), hs.size()]


def mlp():
    x = ph(tf.float32, [4, 8], "x")
    w1 = tf.constant(rng.standard_normal((8, 16)).astype(np.float32) * 0.3)
    b1 = tf.constant(rng.standard_normal(16).astype(np.float32) * 0.1)
    w2 = tf.constant(rng.standard_normal((16, 5)).astype(np.float32) * 0.3)
    b2 = tf.constant(rng.standard_normal(5).astype(np.float32) * 0.1)
    h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
    return tf.nn.softmax(tf.matmul(h, w2) + b2)


def convnet_bias():
    """Keras's spelling: each conv followed by BiasAdd, a batch norm, an
    activation, all in NHWC (the importer's NCHW transposes must cancel
    through them)."""
    x = ph(tf.float32, [2, 10, 10, 3], "x")
    k1 = tf.constant(rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.3)
    b1 = tf.constant(rng.standard_normal(8).astype(np.float32))
    k2 = tf.constant(rng.standard_normal((3, 3, 8, 5)).astype(np.float32) * 0.3)
    b2 = tf.constant(rng.standard_normal(5).astype(np.float32))
    h = tf.nn.bias_add(tf.nn.conv2d(x, k1, 1, "SAME"), b1)
    lin = lambda a, b: tf.constant(np.linspace(a, b, 8).astype(np.float32))  # noqa: E731
    h, _, _ = tf1.nn.fused_batch_norm(h, lin(0.5, 1.5), lin(-0.1, 0.1), lin(0.0, 0.2), lin(1.0, 2.0),
                                      is_training=False)
    h = tf.nn.max_pool2d(tf.nn.relu(h), 2, 2, "VALID")
    h = tf.nn.relu6(tf.nn.bias_add(tf.nn.conv2d(h, k2, 1, "SAME"), b2) * 2.0)
    h = tf.nn.avg_pool2d(h, 5, 5, "VALID")
    return tf.reshape(h, [2, -1])


def convnet():
    x = ph(tf.float32, [2, 9, 9, 3], "x")
    k1 = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3)
    k2 = tf.constant(rng.standard_normal((2, 2, 4, 6)).astype(np.float32) * 0.3)
    h = tf.nn.relu(tf.nn.conv2d(x, k1, 1, "SAME"))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.conv2d(h, k2, 2, "VALID")
    h = tf.nn.avg_pool2d(h, 3, 2, "SAME")
    scale = tf.constant(np.linspace(0.5, 1.5, 6).astype(np.float32))
    off = tf.constant(np.linspace(-0.1, 0.1, 6).astype(np.float32))
    mean = tf.constant(np.linspace(0.0, 0.2, 6).astype(np.float32))
    var = tf.constant(np.linspace(1.0, 2.0, 6).astype(np.float32))
    h, _, _ = tf1.nn.fused_batch_norm(h, scale, off, mean, var, is_training=False)
    h = tf.reshape(h, [2, -1])
    w = tf.constant(rng.standard_normal((6, 3)).astype(np.float32))
    return tf.matmul(h, w)


# ---- op coverage ----------------------------------------------------------------

def ops_elementwise():
    a = ph(tf.float32, [2, 3], "a")
    b = ph(tf.float32, [3], "b")
    i = ph(tf.int32, [2, 3], "i")
    j = ph(tf.int32, [3], "j")
    pos = tf.abs(a) + 0.5
    outs = [a + b, a - b, a * b, a / b, tf.math.floordiv(a, b), tf.math.floormod(a, b),
            tf.maximum(a, b), tf.minimum(a, b), -a, tf.abs(a), tf.exp(a), tf.math.log(pos),
            tf.sqrt(pos), tf.math.rsqrt(pos), tf.square(a), tf.pow(pos, b), tf.tanh(a),
            tf.sigmoid(a), tf.nn.relu(a), tf.nn.relu6(a * 4.0), tf.nn.elu(a),
            tf.nn.softmax(a), tf.nn.log_softmax(a),
            tf.math.floordiv(i, j), tf.math.floormod(i, j), tf.add(i, j), tf.cast(a, tf.int32),
            tf.cast(i, tf.float64), tf.stop_gradient(a), tf.identity(a)]
    return outs


def ops_compare():
    a = ph(tf.float32, [2, 3], "a")
    b = ph(tf.float32, [3], "b")
    p = a < b
    q = a >= b
    return [p, a <= b, a > b, q, tf.equal(a, b), tf.not_equal(a, b), tf.logical_and(p, q),
            tf.logical_or(p, q), tf.logical_not(p), tf1.where(p, a, a * 2.0),
            tf.where(p, a, b), tf.cast(p, tf.float32)]


def ops_shape():
    x = ph(tf.float32, [2, 3, 4], "x")
    v = ph(tf.float32, [4], "v")
    idx = ph(tf.int32, [2], "idx")
    a, b = tf.unstack(x[:, :2, :], axis=1)
    s1, s2 = tf.split(x, 2, axis=2)
    t1, t2, t3 = tf.split(x, [1, 1, 2], axis=2)
    return [tf.reshape(x, [6, -1]), tf.shape(x), tf.size(x), tf.rank(x),
            tf.stack([v, v * 2.0], axis=0), tf.stack([v, v], axis=1), a, b,
            tf.concat([x, x * 2.0, x], axis=1), s1, s2, t1, t2, t3,
            tf.slice(x, [0, 1, 1], [2, 2, -1]),
            x[1], x[:, 1:3, ::2], x[..., -1], x[:, tf.newaxis, 0, ::-1], x[0, ::-2, 1:],
            tf.gather(x, idx, axis=1), tf.gather(v, idx), tf.squeeze(tf.reshape(v, [1, 4, 1])),
            tf.squeeze(tf.reshape(v, [1, 4, 1]), axis=[2]), tf.expand_dims(v, 0), tf.expand_dims(v, -1),
            tf.transpose(x, [2, 0, 1]), tf.tile(v, [3]), tf.fill([2, 3], 1.5), tf.zeros_like(x),
            tf.ones_like(idx), tf.range(2, 11, 3), tf.range(0.0, 1.0, 0.25)]


def ops_reduce():
    x = ph(tf.float32, [2, 3, 4], "x")
    i = ph(tf.int32, [5], "i")
    return [tf.reduce_sum(x, 1), tf.reduce_sum(x, [0, 2], keepdims=True), tf.reduce_sum(x),
            tf.reduce_mean(x, -1), tf.reduce_max(x, 0), tf.reduce_min(x, [1, 2]),
            tf.reduce_prod(x, 2), tf.argmax(x, 1), tf.argmax(x, 2, output_type=tf.int32),
            tf.one_hot(i, 4), tf.one_hot(i, 3, on_value=5.0, off_value=-1.0, axis=0),
            tf.cumsum(x, 1), tf.cumsum(x, 2, exclusive=True, reverse=True),
            tf.matmul(x, x, transpose_b=True), tf.linalg.matmul(x, x, transpose_a=True)]


def ops_extra():
    a = ph(tf.float32, [2, 3], "a")
    b = ph(tf.float32, [3], "b")
    i = ph(tf.int32, [2, 3], "i")
    img = ph(tf.float32, [1, 5, 5, 2], "img")
    k = tf.constant(rng.standard_normal((3, 3, 2, 2)).astype(np.float32))
    nan = a / tf.constant([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]], tf.float32)
    vals, idx = tf.math.top_k(a, 2)
    return [tf.add_n([a, a * 2.0, a + b]), tf.math.squared_difference(a, b), tf.math.reciprocal(b),
            tf.nn.leaky_relu(a, 0.1), tf.nn.softplus(a * 10.0), tf.nn.softsign(a), tf.nn.selu(a),
            tf.math.expm1(a), tf.math.log1p(tf.abs(a)), tf.clip_by_value(a, -0.5, 0.5),
            tf.broadcast_to(b, [4, 3]), tf.reverse(a, [1]), tf.reverse(a, [0, -1]), tf.math.is_nan(nan),
            tf.math.is_finite(nan), tf.reduce_all(a > -1.0, 1), tf.reduce_any(a > 1.0),
            tf.truncatemod(i, 4), tf.truncatediv(i, 4), tf.pad(a, [[1, 0], [0, 2]]),
            tf.pad(a, [[0, 1], [2, 1]], constant_values=7.0), tf.pad(a, [[1, 1], [2, 2]], mode="REFLECT"),
            tf.nn.depthwise_conv2d(img, k, [1, 1, 1, 1], "SAME"),
            tf.nn.depthwise_conv2d(img, k, [1, 2, 2, 1], "VALID"), vals, idx, tf.nn.l2_loss(a),
            tf1.image.resize_bilinear(img, [7, 3]), tf1.image.resize_bilinear(img, [8, 9], align_corners=True),
            tf1.image.resize_bilinear(img, [3, 8], half_pixel_centers=True),
            tf1.image.resize_nearest_neighbor(img, [7, 3]),
            tf1.image.resize_nearest_neighbor(img, [8, 9], align_corners=True),
            tf1.image.resize_nearest_neighbor(img, [3, 8], half_pixel_centers=True),
            tf.nn.local_response_normalization(img, 1, 0.5, 0.3, 0.75),
            tf.nn.conv2d(img, tf.constant(rng.standard_normal((2, 2, 1, 4)).astype(np.float32)), 1, "SAME")]


# ---- TF2: tf.function, functional While/If --------------------------------------

def v2_graph():
    @tf.function
    def f(n, x):
        def body(i, s):
            s = tf.cond(i % 2 == 0, lambda: s + x, lambda: s * 0.5)
            return i + 1, s
        i, s = tf.while_loop(lambda i, s: i < n, body, [tf.constant(0), tf.zeros_like(x)])
        y = tf.cond(tf.reduce_sum(s) > 1.0, lambda: s * 2.0, lambda: s - 1.0)
        return y, i
    n = np.int32(7)
    x = np.array([0.5, 1.5, -2.0], np.float32)
    cf = f.get_concrete_function(tf.TensorSpec([], tf.int32, name="n"), tf.TensorSpec([3], tf.float32, name="x"))
    gd = cf.graph.as_graph_def()
    res = [r.numpy() for r in f(n, x)]
    spec = ",".join(t.name for t in cf.outputs)
    save("v2_while_if", gd, [n, x], res, res, spec)


def v2_rnn():
    """An RNN in a tf.function: functional While over TensorLists (TF2's TensorArray)."""
    w = tf.constant(rng.standard_normal((3, 4)).astype(np.float32) * 0.5)
    u = tf.constant(rng.standard_normal((4, 4)).astype(np.float32) * 0.5)

    @tf.function
    def f(x):
        xs = tf.TensorArray(tf.float32, size=5).unstack(x)
        hs = tf.TensorArray(tf.float32, size=5)
        h = tf.zeros([2, 4])
        for t in tf.range(5):
            h = tf.tanh(tf.matmul(xs.read(t), w) + tf.matmul(h, u))
            hs = hs.write(t, h)
        return h, hs.stack()
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    cf = f.get_concrete_function(tf.TensorSpec([5, 2, 3], tf.float32, name="x"))
    res = [r.numpy() for r in f(x)]
    save("v2_rnn", cf.graph.as_graph_def(), [x], res, res, ",".join(t.name for t in cf.outputs))


def v2_case():
    """tf.switch_case: a Case node with three branch functions."""
    @tf.function
    def f(i, x):
        return tf.switch_case(i, [lambda: x * 2.0, lambda: x + 10.0, lambda: -x])
    x = np.array([1.0, -2.0], np.float32)
    cf = f.get_concrete_function(tf.TensorSpec([], tf.int32, name="i"), tf.TensorSpec([2], tf.float32, name="x"))
    for i in (0, 1, 2, 7):
        res = [f(np.int32(i), x).numpy()]
        save("v2_case_%d" % i, cf.graph.as_graph_def(), [np.int32(i), x], res, res,
             ",".join(t.name for t in cf.outputs))


# ---- recursive functions, assembled as protos --------------------------------------

# ---- TF2 models as users have them: SavedModel directories and default freezes -----

def saved_and_frozen(name, module, fn, inputs):
    """Saves `module` as the SavedModel directory NAME_sm (serving_default =
    fn) and fn's concrete function frozen the TF2 way
    (convert_variables_to_constants_v2, unused_control_flow_input
    Placeholders and all) as NAME.pb; both with the inputs and TF's outputs."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    import shutil
    cf = fn.get_concrete_function()
    res = cf(*[tf.constant(v) for v in inputs])
    if isinstance(res, dict):  # a signature's outputs, in key order (as the frozen graph's)
        res = [res[k] for k in sorted(res)]
    res = [r.numpy() for r in (res if isinstance(res, (list, tuple)) else [res])]
    frozen = convert_variables_to_constants_v2(cf).graph.as_graph_def()
    save(name, frozen, inputs, res, res)
    save(name + "_sm", None, inputs, res, res)
    if ONLY and name + "_sm" not in ONLY:
        return
    d = os.path.join(OUT, name + "_sm")
    shutil.rmtree(d, ignore_errors=True)
    tf.saved_model.save(module, d, signatures={"serving_default": cf})
    for junk in ("fingerprint.pb", "assets"):  # not read; keeps the fixture small
        p = os.path.join(d, junk)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)


def keras_rnn(name, layer):
    """A Keras recurrent layer (hidden 8) with a dense head."""
    import keras
    keras.utils.set_random_seed(7)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    m = keras.Sequential([keras.Input((5, 3)), layer(8), keras.layers.Dense(4)])
    fn = tf.function(lambda x: m(x), input_signature=[tf.TensorSpec([None, 5, 3], tf.float32, name="x")])
    mod = tf.Module()  # only the variables: the Keras model's own functions would triple the size
    mod.weights = [w.value for w in m.weights]
    saved_and_frozen(name, mod, fn, [x])


class Decoder(tf.Module):
    """A greedy decoder: a tf.while_loop feeding argmax tokens back through an
    embedding and a tanh cell, for n steps."""

    def __init__(self):
        super().__init__()
        self.emb = tf.Variable(rng.standard_normal((6, 8)).astype(np.float32) * 0.5)
        self.w = tf.Variable(rng.standard_normal((8, 8)).astype(np.float32) * 0.5)
        self.out = tf.Variable(rng.standard_normal((8, 6)).astype(np.float32) * 0.5)

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="h0"),
                                  tf.TensorSpec([], tf.int32, name="steps")])
    def decode(self, h0, steps):
        def body(i, h, tok, toks):
            h = tf.tanh(tf.matmul(h, self.w) + tf.gather(self.emb, tok))
            tok = tf.argmax(tf.matmul(h, self.out), axis=-1, output_type=tf.int32)
            return i + 1, h, tok, toks.write(i, tok)
        toks = tf.TensorArray(tf.int32, size=steps)
        tok0 = tf.zeros(tf.shape(h0)[:1], tf.int32)
        _, h, _, toks = tf.while_loop(lambda i, *_: i < steps, body, [0, h0, tok0, toks])
        return {"tokens": toks.stack(), "state": h}


def cast_x86():
    """Cast of NaN, infinities and out-of-range floats to integers (x86's values, no error)."""
    x = ph(tf.float32, [12], "x")
    return [tf.cast(x, d) for d in (tf.int8, tf.uint8, tf.int32, tf.int64)]


def models_tf2():
    import keras
    keras_rnn("keras_lstm", keras.layers.LSTM)
    keras_rnn("keras_gru", keras.layers.GRU)
    dec = Decoder()
    saved_and_frozen("while_decoder", dec, dec.decode,
                     [rng.standard_normal((2, 8)).astype(np.float32), np.int32(5)])


def attr_type(t):
    return attr_value_pb2.AttrValue(type=t)


def attr_types(ts):
    return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(type=ts))


def attr_func(name):
    return attr_value_pb2.AttrValue(func=attr_value_pb2.NameAttrList(name=name))


def node(name, op, inputs, **attrs):
    n = node_def_pb2.NodeDef(name=name, op=op, input=inputs)
    for k, v in attrs.items():
        n.attr[k].CopyFrom(v)
    return n


def const_i32(name, v, ctl=()):
    return node(name, "Const", list(ctl), dtype=attr_type(types_pb2.DT_INT32),
                value=attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(v, tf.int32)))


def fdef(name, args, rets, nodes, ret_map):
    f = function_pb2.FunctionDef()
    f.signature.name = name
    for a in args:
        f.signature.input_arg.add(name=a, type=types_pb2.DT_INT32)
    for r in rets:
        f.signature.output_arg.add(name=r, type=types_pb2.DT_INT32)
    f.node_def.extend(nodes)
    for k, v in ret_map.items():
        f.ret[k] = v
    return f


I32 = types_pb2.DT_INT32


def call(name, f, args, direct=False):
    if direct:  # a node whose op is the function itself
        return node(name, f, args)
    return node(name, "StatefulPartitionedCall", args, f=attr_func(f), Tin=attr_types([I32] * len(args)),
                Tout=attr_types([I32]))


def fib_graph():
    """fib(n) = n < 2 ? 1 : fib(n-1) + fib(n-2) (fib(25) = 121393, the thesis's convention):
    StatelessIf and two recursive calls."""
    lib = function_pb2.FunctionDefLibrary()
    lib.function.append(fdef("fib", ["n"], ["r"], [
        const_i32("two", 2),
        node("lt", "Less", ["n", "two:output:0"], T=attr_type(I32)),
        node("if", "StatelessIf", ["lt:z:0", "n"], Tcond=attr_type(types_pb2.DT_BOOL), Tin=attr_types([I32]),
             Tout=attr_types([I32]), then_branch=attr_func("fib_then"), else_branch=attr_func("fib_else")),
    ], {"r": "if:output:0"}))
    lib.function.append(fdef("fib_then", ["n"], ["r"], [const_i32("one", 1)], {"r": "one:output:0"}))
    lib.function.append(fdef("fib_else", ["n"], ["r"], [
        const_i32("one", 1), const_i32("two", 2),
        node("a", "Sub", ["n", "one:output:0"], T=attr_type(I32)),
        node("b", "Sub", ["n", "two:output:0"], T=attr_type(I32)),
        call("fa", "fib", ["a:z:0"]), call("fb", "fib", ["b:z:0"]),
        node("s", "AddV2", ["fa:output:0", "fb:output:0"], T=attr_type(I32)),
    ], {"r": "s:z:0"}))
    gd = graph_pb2.GraphDef()
    gd.library.CopyFrom(lib)
    gd.node.extend([
        node("y", "Identity", ["call"], T=attr_type(I32)),  # before its input: order is not topological
        node("n", "Placeholder", [], dtype=attr_type(I32),
             shape=attr_value_pb2.AttrValue(shape=tf.TensorShape([]).as_proto())),
        call("call", "fib", ["n"]),
    ])

    def fib(n):
        a, b = 1, 1
        for _ in range(n):
            a, b = b, a + b
        return a
    save("fib", gd, [np.int32(15)], [], [np.int32(fib(15))], "y")


def ackermann_graph():
    """ack(m, n) = m == 0 ? n + 1 : n == 0 ? ack(m-1, 1) : ack(m-1, ack(m, n-1)), with direct calls."""
    lib = function_pb2.FunctionDefLibrary()
    lib.function.append(fdef("ack", ["m", "n"], ["r"], [
        const_i32("zero", 0),
        node("m0", "Equal", ["m", "zero:output:0"], T=attr_type(I32)),
        node("if", "If", ["m0:z:0", "m", "n"], Tcond=attr_type(types_pb2.DT_BOOL), Tin=attr_types([I32, I32]),
             Tout=attr_types([I32]), then_branch=attr_func("ack_m0"), else_branch=attr_func("ack_m1")),
    ], {"r": "if:output:0"}))
    lib.function.append(fdef("ack_m0", ["m", "n"], ["r"], [
        const_i32("one", 1), node("s", "AddV2", ["n", "one:output:0"], T=attr_type(I32))], {"r": "s:z:0"}))
    lib.function.append(fdef("ack_m1", ["m", "n"], ["r"], [
        const_i32("zero", 0),
        node("n0", "Equal", ["n", "zero:output:0"], T=attr_type(I32)),
        node("if", "StatelessIf", ["n0:z:0", "m", "n"], Tcond=attr_type(types_pb2.DT_BOOL),
             Tin=attr_types([I32, I32]), Tout=attr_types([I32]), then_branch=attr_func("ack_n0"),
             else_branch=attr_func("ack_n1")),
    ], {"r": "if:output:0"}))
    lib.function.append(fdef("ack_n0", ["m", "n"], ["r"], [
        const_i32("one", 1), node("m1", "Sub", ["m", "one:output:0"], T=attr_type(I32)),
        call("c", "ack", ["m1:z:0", "one:output:0"], direct=True)], {"r": "c:r:0"}))
    lib.function.append(fdef("ack_n1", ["m", "n"], ["r"], [
        const_i32("one", 1), node("m1", "Sub", ["m", "one:output:0"], T=attr_type(I32)),
        node("n1", "Sub", ["n", "one:output:0"], T=attr_type(I32)),
        call("inner", "ack", ["m", "n1:z:0"], direct=True),
        call("outer", "ack", ["m1:z:0", "inner:r:0"], direct=True)], {"r": "outer:r:0"}))
    gd = graph_pb2.GraphDef()
    gd.library.CopyFrom(lib)
    shape = attr_value_pb2.AttrValue(shape=tf.TensorShape([]).as_proto())
    gd.node.extend([
        node("m", "Placeholder", [], dtype=attr_type(I32), shape=shape),
        node("n", "Placeholder", [], dtype=attr_type(I32), shape=shape),
        node("call", "ack", ["m", "n"]),
        node("y", "Identity", ["call"], T=attr_type(I32)),
    ])

    def ack(m, n):
        while m:
            if n == 0:
                n = 1
            else:
                n = ack(m, n - 1)
            m -= 1
        return n + 1
    save("ackermann", gd, [np.int32(2), np.int32(3)], [], [np.int32(ack(2, 3))])


def write_bad(name, gd):
    if ONLY and name not in ONLY:
        return
    with open(os.path.join(OUT, name + ".pb"), "wb") as fh:
        fh.write(gd.SerializeToString())


def error_graphs():
    """GraphDefs that must fail to import (test_tf.c checks the messages)."""
    f32 = attr_type(types_pb2.DT_FLOAT)
    shape = attr_value_pb2.AttrValue(shape=tf.TensorShape([]).as_proto())
    lib = function_pb2.FunctionDefLibrary()
    f = function_pb2.FunctionDef()
    f.signature.name = "f"
    f.signature.input_arg.add(name="x", type=types_pb2.DT_FLOAT)
    f.signature.output_arg.add(name="y", type=types_pb2.DT_FLOAT)
    f.node_def.extend([node("d", "Digamma", ["x"], T=f32)])
    f.ret["y"] = "d:y:0"
    lib.function.append(f)
    gd = graph_pb2.GraphDef()
    gd.library.CopyFrom(lib)
    gd.node.extend([node("x", "Placeholder", [], dtype=f32, shape=shape),
                    node("c", "PartitionedCall", ["x"], f=attr_func("f"), Tin=attr_types([types_pb2.DT_FLOAT]),
                         Tout=attr_types([types_pb2.DT_FLOAT]))])
    write_bad("bad_function_op", gd)
    # a Merge of two values that are not the sides of one cond
    gd = graph_pb2.GraphDef()
    gd.node.extend([node("x", "Placeholder", [], dtype=f32, shape=shape),
                    node("y", "Placeholder", [], dtype=f32, shape=shape),
                    node("m", "Merge", ["x", "y"], T=f32, N=attr_value_pb2.AttrValue(i=2))])
    write_bad("bad_merge", gd)


def main():
    os.makedirs(OUT, exist_ok=True)
    f32 = np.float32
    v1("while_scalar", while_scalar, {"n": np.int32(10), "x": f32(1.5)})
    v1("cond_v1", cond_v1, {"p": np.bool_(True), "x": np.array([1, 2, 3], f32)})
    v1("cond_v1_false", cond_v1_false, {"p": np.bool_(False), "x": np.array([1, 2, 3], f32)})
    v1("cond_in_loop", cond_in_loop, {"n": np.int32(10)})
    v1("nested_loops", nested_loops, {"n": np.int32(4), "m": np.int32(3)})
    x2 = np.array([1.5, -0.5], f32)
    v1("invariant_cond_loop", invariant_cond_loop, {"n": np.int32(10), "flag": np.bool_(False), "x": x2})
    xs = {"x": np.array([1, 2, 3], f32), "y": np.array([-1, 5, 0.5], f32)}
    for p in (False, True):
        for q in (False, True):
            v1("cond_nested_%d%d" % (p, q), cond_nested, dict(xs, p=np.bool_(p), q=np.bool_(q)))
    v1("loop_index", loop_index, {"x": rng.standard_normal((5, 3)).astype(f32),
                                  "rows": np.array([True, False, False, True, True])})
    for p in (False, True):
        v1("loop_in_cond_%d" % p, loop_in_cond, {"p": np.bool_(p), "n": np.int32(5), "x": f32(3.0)})
    v1("rnn_ta", rnn_ta, {"x": rng.standard_normal((5, 2, 3)).astype(f32)})
    v1("mlp", mlp, {"x": rng.standard_normal((4, 8)).astype(f32)})
    v1("convnet", convnet, {"x": rng.standard_normal((2, 9, 9, 3)).astype(f32)})
    b = rng.standard_normal(3).astype(f32)
    b[np.abs(b) < 0.3] = 0.7
    v1("ops_elementwise", ops_elementwise,
       {"a": rng.standard_normal((2, 3)).astype(f32), "b": b,
        "i": np.array([[7, -7, 5], [0, 9, -9]], np.int32), "j": np.array([2, 3, -4], np.int32)})
    v1("ops_compare", ops_compare, {"a": rng.standard_normal((2, 3)).astype(f32),
                                    "b": rng.standard_normal(3).astype(f32)})
    v1("ops_shape", ops_shape, {"x": rng.standard_normal((2, 3, 4)).astype(f32),
                                "v": rng.standard_normal(4).astype(f32), "idx": np.array([2, 0], np.int32)})
    v1("ops_extra", ops_extra, {"a": rng.standard_normal((2, 3)).astype(f32),
                                "b": np.array([0.5, -2.0, 4.0], f32),
                                "i": np.array([[7, -7, 5], [0, 9, -9]], np.int32),
                                "img": rng.standard_normal((1, 5, 5, 2)).astype(f32)})
    v1("ops_reduce", ops_reduce, {"x": rng.standard_normal((2, 3, 4)).astype(f32),
                                  "i": np.array([0, 3, 1, -1, 2], np.int32)})
    v2_graph()
    v2_rnn()
    v2_case()
    fib_graph()
    ackermann_graph()
    error_graphs()
    v1("convnet_bias", convnet_bias, {"x": rng.standard_normal((2, 10, 10, 3)).astype(f32)})
    models_tf2()
    v1("cast_x86", cast_x86, {"x": np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 300, -129, 2.7, -2.7,
                                             70000], f32)})
    lines = INDEX
    if ONLY:  # the other lines as they are, these replaced or added
        with open(os.path.join(OUT, "index.txt")) as f:
            old = [ln for ln in f.read().splitlines() if ln]
        mine = {ln.split()[0]: ln for ln in INDEX if ln.split()[0] in ONLY}
        lines = [mine.pop(ln.split()[0], ln) for ln in old] + list(mine.values())
    with open(os.path.join(OUT, "index.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


main()
