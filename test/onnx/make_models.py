"""test/onnx/make_models.py — the small models of test/unit/test_onnx.c, made
with the onnx helper (build/onnx-venv, see setup.sh) and committed under
test/onnx/models/. Run by hand after changing it:
    build/onnx-venv/bin/python test/onnx/make_models.py
Weights are small integers so that every expected output is exact."""
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
OPSET = [H.make_opsetid("", 17)]


def save(name, graph, **kw):
    m = H.make_model(graph, opset_imports=OPSET, producer_name="tfvm-test", **kw)
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name))


def f32(name, shape):
    return H.make_tensor_value_info(name, TP.FLOAT, shape)


def init(name, a):
    return NH.from_array(np.asarray(a), name)


def const(name, a):
    return H.make_node("Constant", [], [name], value=NH.from_array(np.asarray(a)))


def mlp():
    # y = relu(x @ W1 + b1) @ W2 + b2; W1 is listed as a graph input too (exporters do that)
    W1 = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    b1 = np.array([1, -2, 3], np.float32)
    W2 = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    b2 = np.array([0.5, -0.5], np.float32)
    g = H.make_graph(
        [H.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1"),
         H.make_node("Relu", ["h"], ["r"]),
         H.make_node("Gemm", ["r", "W2", "b2"], ["y"], name="fc2")],
        "mlp", [f32("x", [2, 4]), f32("W1", [4, 3])], [f32("y", [2, 2])],
        [init("W1", W1), init("b1", b1), init("W2", W2), init("b2", b2)])
    save("mlp.onnx", g)
    x = np.array([[1, 2, 3, 4], [-1, 0, 1, 2]], np.float32)
    print("mlp", (np.maximum(x @ W1 + b1, 0) @ W2 + b2).tolist())


def cnn():
    w = np.array([[[[0, 1, 0], [1, 1, 1], [0, 1, 0]]], [[[1, 0, -1], [0, 0, 0], [-1, 0, 1]]]], np.float32)
    b = np.array([1, 0], np.float32)
    W = (np.arange(24, dtype=np.float32).reshape(8, 3) % 5) - 2
    g = H.make_graph(
        [H.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         H.make_node("Relu", ["c"], ["r"]),
         H.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         H.make_node("Flatten", ["p"], ["f"]),
         H.make_node("Gemm", ["f", "W"], ["y"])],
        "cnn", [f32("x", [1, 1, 4, 4])], [f32("y", [1, 3])], [init("w", w), init("b", b), init("W", W)])
    save("cnn.onnx", g)


def if_model():
    then = H.make_graph([const("one", np.float32(1)), H.make_node("Add", ["x", "one"], ["t"])], "then", [],
                        [f32("t", [3])])
    els = H.make_graph([const("two", np.float32(2)), H.make_node("Mul", ["x", "two"], ["e"])], "else", [],
                       [f32("e", [3])])
    g = H.make_graph([H.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "if",
                     [H.make_tensor_value_info("c", TP.BOOL, []), f32("x", [3])], [f32("y", [3])])
    save("if.onnx", g)


def loop100():
    # s = sum of iter over 100 iterations: 4950; the trip count is a constant
    body = H.make_graph([H.make_node("Add", ["s_in", "i"], ["s_out"]), H.make_node("Identity", ["c_in"], ["c_out"])],
                        "body", [H.make_tensor_value_info("i", TP.INT64, []), H.make_tensor_value_info("c_in", TP.BOOL, []),
                                 H.make_tensor_value_info("s_in", TP.INT64, [])],
                        [H.make_tensor_value_info("c_out", TP.BOOL, []), H.make_tensor_value_info("s_out", TP.INT64, [])])
    g = H.make_graph([const("M", np.int64(100)), const("s0", np.int64(0)),
                      H.make_node("Loop", ["M", "", "s0"], ["s"], body=body)], "loop100",
                     [], [H.make_tensor_value_info("s", TP.INT64, [])])
    save("loop100.onnx", g)


def loop_scan():
    # x carried (x + 1 each time), scan output x * iter (as f32), cond from n: stop when iter >= n - 1
    body = H.make_graph(
        [const("one", np.float32(1)), const("onei", np.int64(1)),
         H.make_node("Add", ["x_in", "one"], ["x_out"]),
         H.make_node("Cast", ["i"], ["fi"], to=TP.FLOAT),
         H.make_node("Mul", ["x_out", "fi"], ["sc"]),
         H.make_node("Add", ["i", "onei"], ["i1"]),
         H.make_node("Less", ["i1", "n"], ["c_out"])],
        "body", [H.make_tensor_value_info("i", TP.INT64, []), H.make_tensor_value_info("c_in", TP.BOOL, []),
                 f32("x_in", [2])],
        [H.make_tensor_value_info("c_out", TP.BOOL, []), f32("x_out", [2]), f32("sc", [2])])
    g = H.make_graph([const("t", np.bool_(True)), H.make_node("Loop", ["", "t", "x"], ["xf", "stack"], body=body)],
                     "loop_scan", [f32("x", [2]), H.make_tensor_value_info("n", TP.INT64, [])],
                     [f32("xf", [2]), f32("stack", [None, 2])])
    save("loop_scan.onnx", g)


def nested():
    # outer M = m: acc += sum over inner j < 4 of (i * j): inner loop reads outer iter i
    inner = H.make_graph(
        [H.make_node("Mul", ["i", "j"], ["p"]), H.make_node("Add", ["a_in", "p"], ["a_out"]),
         H.make_node("Identity", ["ci"], ["co"])],
        "inner", [H.make_tensor_value_info("j", TP.INT64, []), H.make_tensor_value_info("ci", TP.BOOL, []),
                  H.make_tensor_value_info("a_in", TP.INT64, [])],
        [H.make_tensor_value_info("co", TP.BOOL, []), H.make_tensor_value_info("a_out", TP.INT64, [])])
    outer = H.make_graph(
        [const("four", np.int64(4)), H.make_node("Loop", ["four", "", "acc_in"], ["acc_out"], body=inner),
         H.make_node("Identity", ["c_in"], ["c_out"])],
        "outer", [H.make_tensor_value_info("i", TP.INT64, []), H.make_tensor_value_info("c_in", TP.BOOL, []),
                  H.make_tensor_value_info("acc_in", TP.INT64, [])],
        [H.make_tensor_value_info("c_out", TP.BOOL, []), H.make_tensor_value_info("acc_out", TP.INT64, [])])
    g = H.make_graph([const("z", np.int64(0)), H.make_node("Loop", ["m", "", "z"], ["acc"], body=outer)], "nested",
                     [H.make_tensor_value_info("m", TP.INT64, [])], [H.make_tensor_value_info("acc", TP.INT64, [])])
    save("nested_loop.onnx", g)


def if_in_loop():
    # acc += i when i is even, acc -= 1 when odd
    then = H.make_graph([H.make_node("Add", ["a_in", "i"], ["t"])], "then", [],
                        [H.make_tensor_value_info("t", TP.INT64, [])])
    els = H.make_graph([const("one", np.int64(1)), H.make_node("Sub", ["a_in", "one"], ["e"])], "else", [],
                       [H.make_tensor_value_info("e", TP.INT64, [])])
    body = H.make_graph(
        [const("two", np.int64(2)), const("zero", np.int64(0)), H.make_node("Mod", ["i", "two"], ["r"]),
         H.make_node("Equal", ["r", "zero"], ["even"]),
         H.make_node("If", ["even"], ["a_out"], then_branch=then, else_branch=els),
         H.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [H.make_tensor_value_info("i", TP.INT64, []), H.make_tensor_value_info("c_in", TP.BOOL, []),
                 H.make_tensor_value_info("a_in", TP.INT64, [])],
        [H.make_tensor_value_info("c_out", TP.BOOL, []), H.make_tensor_value_info("a_out", TP.INT64, [])])
    g = H.make_graph([const("z", np.int64(0)), H.make_node("Loop", ["m", "", "z"], ["acc"], body=body)], "if_in_loop",
                     [H.make_tensor_value_info("m", TP.INT64, [])], [H.make_tensor_value_info("acc", TP.INT64, [])])
    save("if_in_loop.onnx", g)


def loop_in_if():
    # c ? (sum of iter below n, a Loop in the then branch reading the outer n) : -1
    body = H.make_graph([H.make_node("Add", ["s_in", "i"], ["s_out"]), H.make_node("Identity", ["c_in"], ["c_out"])],
                        "body", [H.make_tensor_value_info("i", TP.INT64, []), H.make_tensor_value_info("c_in", TP.BOOL, []),
                                 H.make_tensor_value_info("s_in", TP.INT64, [])],
                        [H.make_tensor_value_info("c_out", TP.BOOL, []), H.make_tensor_value_info("s_out", TP.INT64, [])])
    then = H.make_graph([const("z", np.int64(0)), H.make_node("Loop", ["n", "", "z"], ["t"], body=body)], "then", [],
                        [H.make_tensor_value_info("t", TP.INT64, [])])
    els = H.make_graph([const("e", np.int64(-1))], "else", [], [H.make_tensor_value_info("e", TP.INT64, [])])
    g = H.make_graph([H.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "loop_in_if",
                     [H.make_tensor_value_info("c", TP.BOOL, []), H.make_tensor_value_info("n", TP.INT64, [])],
                     [H.make_tensor_value_info("y", TP.INT64, [])])
    save("loop_in_if.onnx", g)


def reshape_chain():
    # y = x.reshape(x.shape[0], -1) the way exporters write it: Shape, Gather, Unsqueeze, Concat, Reshape
    g = H.make_graph(
        [H.make_node("Shape", ["x"], ["s"]), const("zero", np.int64(0)), H.make_node("Gather", ["s", "zero"], ["n"]),
         const("ax", np.array([0], np.int64)), H.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
         const("m1", np.array([-1], np.int64)), H.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
         H.make_node("Reshape", ["x", "shape"], ["y"])],
        "reshape_chain", [f32("x", [2, 3, 4])], [f32("y", [2, 12])])
    save("reshape_chain.onnx", g)


def stacked_lstm():
    # two LSTM layers as exporters stack them (Y squeezed into the next one, no initial states): the
    # second layer's length and zero state come from the first one's Y, whose shape the importer
    # knows; the expected output from onnx's reference evaluator
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(7)
    T, I, Hd = 4, 2, 3

    def w(*shape):
        return (rng.standard_normal(shape) / 2).astype(np.float32)

    g = H.make_graph(
        [H.make_node("LSTM", ["x", "W0", "R0", "B0"], ["y0"], hidden_size=Hd),
         const("ax1", np.array([1], np.int64)), H.make_node("Squeeze", ["y0", "ax1"], ["x1"]),
         H.make_node("LSTM", ["x1", "W1", "R1", "B1"], ["y1", "h1", "c1"], hidden_size=Hd),
         H.make_node("Squeeze", ["y1", "ax1"], ["y"])],
        "stacked_lstm", [f32("x", [T, 1, I])], [f32("y", [T, 1, Hd])],
        [init("W0", w(1, 4 * Hd, I)), init("R0", w(1, 4 * Hd, Hd)), init("B0", w(1, 8 * Hd)),
         init("W1", w(1, 4 * Hd, Hd)), init("R1", w(1, 4 * Hd, Hd)), init("B1", w(1, 8 * Hd))])
    save("stacked_lstm.onnx", g)
    x = w(T, 1, I)
    np.save(os.path.join(OUT, "stacked_lstm.in.npy"), x)
    y = ReferenceEvaluator(os.path.join(OUT, "stacked_lstm.onnx")).run(None, {"x": x})[0]
    np.save(os.path.join(OUT, "stacked_lstm.out.npy"), y.astype(np.float32))


def stacked_chain():
    # three recurrent layers as exporters stack them (LSTM, GRU with linear_before_reset, LSTM; each Y
    # squeezed into the next one's X), over 70 steps: the importer makes them one loop over chunks of 32
    # steps (the last one 6); their steps are heavy enough for a chain (batch 2, 64 and 80 units). The
    # weights are computed in the graph (sin of a range), which keeps the file small. As torch writes
    # it, the GRU's initial state is built from the Shape of its X (here 0.25, not zeros); the first
    # layer's last h is read after the last layer. The same layers with the first Y also an output of
    # the graph (stacked_unchained.onnx) make a chain of the other two only: the test wants the same
    # bits of both, and onnx's reference evaluator's numbers
    from onnx.reference import ReferenceEvaluator
    T, B, I, H1, H2, H3 = 70, 2, 3, 64, 80, 64
    x = (np.random.default_rng(11).standard_normal((T, B, I)) / 2).astype(np.float32)

    def weight(name, shape, phase):
        n = int(np.prod(shape))
        return [const(name + "_r", np.array([0, n, 1], np.float32)),
                H.make_node("Split", [name + "_r"], [name + "_a", name + "_b", name + "_c"], axis=0),
                H.make_node("Squeeze", [name + "_a"], [name + "_a0"]),
                H.make_node("Squeeze", [name + "_b"], [name + "_b0"]),
                H.make_node("Squeeze", [name + "_c"], [name + "_c0"]),
                H.make_node("Range", [name + "_a0", name + "_b0", name + "_c0"], [name + "_i"]),
                const(name + "_f", np.array(0.37, np.float32)), const(name + "_p", np.array(phase, np.float32)),
                H.make_node("Mul", [name + "_i", name + "_f"], [name + "_m"]),
                H.make_node("Add", [name + "_m", name + "_p"], [name + "_q"]),
                H.make_node("Sin", [name + "_q"], [name + "_s"]),
                const(name + "_k", np.array(0.3, np.float32)),
                H.make_node("Mul", [name + "_s", name + "_k"], [name + "_v"]),
                const(name + "_sh", np.array(shape, np.int64)),
                H.make_node("Reshape", [name + "_v", name + "_sh"], [name])]

    wnodes = (weight("W1", [1, 4 * H1, I], 0.1) + weight("R1", [1, 4 * H1, H1], 0.2) + weight("B1", [1, 8 * H1], 0.3) +
              weight("W2", [1, 3 * H2, H1], 0.4) + weight("R2", [1, 3 * H2, H2], 0.5) + weight("B2", [1, 6 * H2], 0.6) +
              weight("W3", [1, 4 * H3, H2], 0.7) + weight("R3", [1, 4 * H3, H3], 0.8))

    def graph(name, unchained):
        nodes = wnodes + [
            H.make_node("LSTM", ["x", "W1", "R1", "B1"], ["y1", "h1"], hidden_size=H1),
            const("ax1", np.array([1], np.int64)), H.make_node("Squeeze", ["y1", "ax1"], ["x2"]),
            H.make_node("Shape", ["x2"], ["s2"]), const("one", np.array([1], np.int64)),
            const("two", np.array([2], np.int64)), H.make_node("Slice", ["s2", "one", "two"], ["b2"]),
            const("h2d", np.array([H2], np.int64)), H.make_node("Concat", ["one", "b2", "h2d"], ["hs2"], axis=0),
            const("q", np.array([0.25], np.float32)), H.make_node("Expand", ["q", "hs2"], ["h02"]),
            H.make_node("GRU", ["x2", "W2", "R2", "B2", "", "h02"], ["y2"], hidden_size=H2, linear_before_reset=1),
            H.make_node("Squeeze", ["y2", "ax1"], ["x3"]),
            H.make_node("LSTM", ["x3", "W3", "R3"], ["y3", "", "c3"], hidden_size=H3),
            H.make_node("Squeeze", ["y3", "ax1"], ["y"]), H.make_node("Identity", ["h1"], ["h1_out"])]
        outs = [f32("y", [T, B, H3]), f32("h1_out", [1, B, H1]), f32("c3", [1, B, H3])]
        if unchained:
            outs.append(f32("y1", [T, 1, B, H1]))
        save(name + ".onnx", H.make_graph(nodes, name, [f32("x", [T, B, I])], outs))

    graph("stacked_chain", False)
    graph("stacked_unchained", True)
    np.save(os.path.join(OUT, "stacked_chain.in.npy"), x)
    got = ReferenceEvaluator(os.path.join(OUT, "stacked_chain.onnx")).run(None, {"x": x})
    for k, name in enumerate(("y", "h1", "c3")):
        np.save(os.path.join(OUT, "stacked_chain.%s.npy" % name), got[k].astype(np.float32))


def embed_linear():
    # a token's embedding through a linear layer and a ReLU: the optimizer gathers rows of the table's
    # product (embed_linear.onnx, E an initializer); embed_linear_param.onnx lists E as an input with
    # that default, which keeps the product: the test compares the two bit for bit
    rng = np.random.default_rng(11)
    V, K, N = 6, 37, 19
    E = rng.standard_normal((V, K)).astype(np.float32)
    W = rng.standard_normal((N, K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    for name, inputs in (("embed_linear.onnx", []), ("embed_linear_param.onnx", [f32("E", [V, K])])):
        g = H.make_graph(
            [H.make_node("Gather", ["E", "idx"], ["e"], axis=0),
             H.make_node("Gemm", ["e", "W", "b"], ["h"], transB=1), H.make_node("Relu", ["h"], ["y"])],
            "embed_linear", [H.make_tensor_value_info("idx", TP.INT64, [1])] + inputs, [f32("y", [1, N])],
            [init("E", E), init("W", W), init("b", b)])
        save(name, g)
    np.save(os.path.join(OUT, "embed_linear.E.npy"), E)


def scan():
    # running sum of the rows of x [3, 2], rows read in reverse; outputs the final sum and the sums
    body = H.make_graph([H.make_node("Add", ["s_in", "row"], ["s_out"]), H.make_node("Identity", ["s_out"], ["o"])],
                        "body", [f32("s_in", [2]), f32("row", [2])], [f32("s_out", [2]), f32("o", [2])])
    g = H.make_graph([H.make_node("Scan", ["s0", "x"], ["s", "sums"], body=body, num_scan_inputs=1,
                                  scan_input_directions=[1])],
                     "scan", [f32("s0", [2]), f32("x", [3, 2])], [f32("s", [2]), f32("sums", [3, 2])])
    save("scan.onnx", g)


def external():
    W = np.array([[1, 2], [3, 4]], np.float32)
    g = H.make_graph([H.make_node("MatMul", ["x", "W"], ["y"])], "ext", [f32("x", [1, 2])], [f32("y", [1, 2])],
                     [init("W", W)])
    m = H.make_model(g, opset_imports=OPSET)
    m.ir_version = 8
    if os.path.exists(os.path.join(OUT, "ext.bin")):
        os.remove(os.path.join(OUT, "ext.bin"))  # onnx.save appends to it
    onnx.external_data_helper.convert_model_to_external_data(m, all_tensors_to_one_file=True, location="ext.bin",
                                                             size_threshold=0)
    onnx.save(m, os.path.join(OUT, "external.onnx"))
    # the same model pointing outside its directory (written as bytes: onnx.save would write the data there)
    m = onnx.load(os.path.join(OUT, "external.onnx"), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../ext.bin"
    with open(os.path.join(OUT, "external_escape.onnx"), "wb") as f:
        f.write(m.SerializeToString())


def cast_x86():
    # Cast of NaN, infinities and out-of-range floats to integers: what ORT
    # gives on x86 (test/e2e/extra.sh holds ORT's outputs)
    outs = [("i8", TP.INT8), ("u8", TP.UINT8), ("i32", TP.INT32), ("i64", TP.INT64)]
    g = H.make_graph([H.make_node("Cast", ["x"], [n], to=t) for n, t in outs], "cast_x86", [f32("x", [12])],
                     [H.make_tensor_value_info(n, t, [12]) for n, t in outs])
    save("cast_x86.onnx", g)


def unsupported():
    # an op no importer file translates (random sampling)
    g = H.make_graph([H.make_node("Bernoulli", ["x"], ["y"], name="bern0")], "bad", [f32("x", [2, 2])],
                     [f32("y", [2, 2])])
    save("unsupported.onnx", g)


def u64_ops():
    # uint64 computes in i64: Div, Mod, right BitShift, Less and Max of values past 2^63
    u = lambda n: H.make_tensor_value_info(n, TP.UINT64, [4])
    nodes = [H.make_node("Div", ["a", "b"], ["q"]), H.make_node("Mod", ["a", "b"], ["r"]),
             H.make_node("BitShift", ["a", "s"], ["sh"], direction="RIGHT"), H.make_node("Less", ["a", "b"], ["lt"]),
             H.make_node("Max", ["a", "b"], ["mx"]), H.make_node("Add", ["a", "b"], ["sum"]),
             H.make_node("Cast", ["a"], ["f"], to=TP.DOUBLE)]
    g = H.make_graph(nodes, "u64", [u("a"), u("b"), u("s")],
                     [u("q"), u("r"), u("sh"), H.make_tensor_value_info("lt", TP.BOOL, [4]), u("mx"), u("sum"),
                      H.make_tensor_value_info("f", TP.DOUBLE, [4])])
    save("u64_ops.onnx", g)


def scatter_dynamic():
    # ScatterElements (axis 1, a negative index) and ScatterND on data whose dims are symbolic
    i64 = lambda n, s: H.make_tensor_value_info(n, TP.INT64, s)
    nodes = [H.make_node("ScatterElements", ["x", "ei", "eu"], ["e"], axis=1),
             H.make_node("ScatterND", ["x", "ni", "nu"], ["s"])]
    g = H.make_graph(nodes, "scatter", [f32("x", ["n", "m"]), i64("ei", ["a", "b"]), f32("eu", ["a", "b"]),
                                        i64("ni", ["c", 2]), f32("nu", ["c"])],
                     [f32("e", ["n", "m"]), f32("s", ["n", "m"])])
    save("scatter_dynamic.onnx", g)


def scatter_one():
    # ScatterND of one element (an index tuple as long as data's rank) into data of symbolic dims
    g = H.make_graph([H.make_node("ScatterND", ["x", "i", "u"], ["y"])], "scatter_one",
                     [f32("x", ["n", "m"]), H.make_tensor_value_info("i", TP.INT64, [1, 2]), f32("u", [1])],
                     [f32("y", ["n", "m"])])
    save("scatter_one.onnx", g)


def scatter_static():
    # ScatterND and ScatterElements without a reduction on static dims: rows set in order (a later
    # update of a row wins, as in ONNX Runtime), an update's inf only in its own row
    i64 = lambda n, s: H.make_tensor_value_info(n, TP.INT64, s)
    nodes = [H.make_node("ScatterND", ["x", "ni", "nu"], ["s"]),
             H.make_node("ScatterElements", ["x", "ei", "eu"], ["e"], axis=0)]
    g = H.make_graph(nodes, "scatter_static", [f32("x", [3, 2]), i64("ni", [3, 1]), f32("nu", [3, 2]),
                                               i64("ei", [1, 2]), f32("eu", [1, 2])],
                     [f32("s", [3, 2]), f32("e", [3, 2])])
    save("scatter_static.onnx", g)


def spelled_normalization(axes):
    # x normalized over axes into "n" as the importer lowered LayerNormalization before (ReduceMean, Sub,
    # Mul, ReduceMean, Add, Sqrt, Div, Mul); the graph gives the initializers "eps" and "one"
    return [H.make_node("ReduceMean", ["x"], ["m"], axes=axes, keepdims=1),
            H.make_node("Sub", ["x", "m"], ["c"]),
            H.make_node("Mul", ["c", "c"], ["sq"]),
            H.make_node("ReduceMean", ["sq"], ["v"], axes=axes, keepdims=1),
            H.make_node("Add", ["v", "eps"], ["ve"]),
            H.make_node("Sqrt", ["ve"], ["s"]),
            H.make_node("Div", ["one", "s"], ["inv"]),
            H.make_node("Mul", ["c", "inv"], ["n"])]


def layer_norm():
    # LayerNormalization with and without a bias beside the same normalization spelled out as the
    # ops an older exporter writes (ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Mul, Add):
    # test_onnx wants the same bits from both
    D = 11
    scale = np.linspace(-1.5, 2, D).astype(np.float32)
    bias = np.linspace(0.25, -0.5, D).astype(np.float32)
    nodes = [H.make_node("LayerNormalization", ["x", "scale", "bias"], ["y1"], axis=-1, epsilon=1e-5),
             H.make_node("LayerNormalization", ["x", "scale"], ["z1"], axis=-1, epsilon=1e-5),
             *spelled_normalization([-1]),
             H.make_node("Mul", ["n", "scale"], ["z2"]),
             H.make_node("Add", ["z2", "bias"], ["y2"])]
    g = H.make_graph(nodes, "layer_norm", [f32("x", [2, 3, D])],
                     [f32("y1", [2, 3, D]), f32("y2", [2, 3, D]), f32("z1", [2, 3, D]), f32("z2", [2, 3, D])],
                     [init("scale", scale), init("bias", bias), init("eps", np.float32(1e-5)),
                      init("one", np.float32(1))])
    save("layer_norm.onnx", g)


def instance_norm():
    # InstanceNormalization beside the same normalization spelled out as the importer lowered it before
    # (ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, then the per-channel Mul and Add): test_onnx
    # wants the same bits from both
    scale = np.array([1.5, -0.75, 2.0], np.float32)
    bias = np.array([0.25, -0.5, 0.0], np.float32)
    nodes = [H.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y1"], epsilon=1e-5),
             *spelled_normalization([2, 3]),
             H.make_node("Mul", ["n", "scale4"], ["t"]),
             H.make_node("Add", ["t", "bias4"], ["y2"])]
    g = H.make_graph(nodes, "instance_norm", [f32("x", [2, 3, 4, 5])], [f32("y1", [2, 3, 4, 5]), f32("y2", [2, 3, 4, 5])],
                     [init("scale", scale), init("bias", bias), init("scale4", scale.reshape(3, 1, 1)),
                      init("bias4", bias.reshape(3, 1, 1)), init("eps", np.float32(1e-5)), init("one", np.float32(1))])
    save("instance_norm.onnx", g)


def conv1d_act():
    # 1-D convolutions as Wav2Vec2's and Whisper's front ends have them: one with a bias before
    # GELU spelled out (as torch.onnx exports nn.GELU below opset 20), one without a bias before Relu
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((6, 4, 3)) * 0.5).astype(np.float32)
    b1 = (rng.standard_normal(6) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((5, 6, 3)) * 0.5).astype(np.float32)
    nodes = [H.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1]),
             H.make_node("Div", ["c", "sqrt2"], ["d"]),
             H.make_node("Erf", ["d"], ["e"]),
             H.make_node("Add", ["e", "one"], ["f"]),
             H.make_node("Mul", ["c", "f"], ["g0"]),
             H.make_node("Mul", ["g0", "half"], ["g"]),
             H.make_node("Conv", ["g", "w2"], ["h"], strides=[2]),
             H.make_node("Relu", ["h"], ["y"])]
    g = H.make_graph(nodes, "conv1d_act", [f32("x", [1, 4, 9])], [f32("y", [1, 5, 4])],
                     [init("w1", w1), init("b1", b1), init("w2", w2), init("sqrt2", np.float32(np.sqrt(2))),
                      init("one", np.float32(1)), init("half", np.float32(0.5))])
    save("conv1d_act.onnx", g)


def aspp_dilated():
    # a 3x3 layer dilated by 12 over a 16x16 map, padded by 12 (DeepLabV3's ASPP): each outer tap reads x
    # for a quarter of the rows or columns only
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.2).astype(np.float32)
    b = (rng.standard_normal(32) * 0.1).astype(np.float32)
    nodes = [H.make_node("Conv", ["x", "w", "b"], ["c"], pads=[12, 12, 12, 12], dilations=[12, 12]),
             H.make_node("Relu", ["c"], ["y"])]
    g = H.make_graph(nodes, "aspp_dilated", [f32("x", [8, 32, 16, 16])], [f32("y", [8, 32, 16, 16])],
                     [init("w", w), init("b", b)])
    save("aspp_dilated.onnx", g)


def unsupported_many():
    # three unsupported ops, one unnamed and one inside an If's branch: all are listed
    then_g = H.make_graph([H.make_node("RandomNormalLike", ["x"], ["t"], name="noise")], "then", [],
                          [f32("t", [2, 2])])
    else_g = H.make_graph([H.make_node("Identity", ["x"], ["e"])], "else", [], [f32("e", [2, 2])])
    g = H.make_graph([H.make_node("Bernoulli", ["x"], ["b"], name="bern0"),
                      H.make_node("RandomUniformLike", ["x"], ["u"]),
                      H.make_node("Add", ["b", "u"], ["s"], name="add"),
                      H.make_node("If", ["c"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)],
                     "bad", [f32("x", [2, 2]), H.make_tensor_value_info("c", TP.BOOL, [])], [f32("y", [2, 2])])
    save("unsupported_many.onnx", g)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    mlp()
    cnn()
    if_model()
    loop100()
    loop_scan()
    nested()
    if_in_loop()
    loop_in_if()
    reshape_chain()
    stacked_lstm()
    stacked_chain()
    embed_linear()
    scan()
    external()
    unsupported()
    unsupported_many()
    u64_ops()
    scatter_dynamic()
    scatter_one()
    scatter_static()
    layer_norm()
    conv1d_act()
    aspp_dilated()
    instance_norm()
    cast_x86()
    print("make_models.py: models in", OUT)
