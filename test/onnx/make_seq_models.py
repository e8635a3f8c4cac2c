"""test/onnx/make_seq_models.py — the small models of test/unit/test_onnx_seq.c
(CausalConvWithState, DFT, FlexAttention, LinearAttention and their errors),
made with the onnx helper (build/onnx-venv, see setup.sh) and committed under
test/onnx/models/seq_*.onnx. Run by hand after changing it:
    build/onnx-venv/bin/python test/onnx/make_seq_models.py
Values are chosen so that every expected output is known by hand."""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as H
from onnx import numpy_helper as NH

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")


def save(name, graph, opset=27, preview=False, check=True):
    ops = [H.make_opsetid("", opset)]
    if preview:
        ops.append(H.make_opsetid("ai.onnx.preview", 1))
    m = H.make_model(graph, opset_imports=ops, producer_name="tfvm-test")
    m.ir_version = 10
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name))


def t(name, elem, shape):
    return H.make_tensor_value_info(name, elem, shape)


def causal_conv():
    w = NH.from_array(np.array([[[1, 2]], [[0, -1]]], np.float32), "w")
    b = NH.from_array(np.array([10, -1], np.float32), "b")
    n = H.make_node("CausalConvWithState", ["x", "w", "b", "past"], ["y", "present"], name="cc0")
    g = H.make_graph([n], "cc", [t("x", TP.FLOAT, [1, 2, 3]), t("past", TP.FLOAT, [1, 2, 1])],
                     [t("y", TP.FLOAT, [1, 2, 3]), t("present", TP.FLOAT, [1, 2, 1])], [w, b])
    save("seq_causal_conv.onnx", g)
    n = H.make_node("CausalConvWithState", ["x", "w"], ["y", "present"], name="cc0", activation="gelu")
    g = H.make_graph([n], "cc", [t("x", TP.FLOAT, [1, 2, 3])],
                     [t("y", TP.FLOAT, [1, 2, 3]), t("present", TP.FLOAT, [1, 2, 1])], [w])
    save("seq_bad_activation.onnx", g, check=False)


def dft():
    # the axis is a graph input: known only at run time
    n = H.make_node("DFT", ["x", "", "axis"], ["y"], name="dft0", onesided=1)
    g = H.make_graph([n], "dft", [t("x", TP.FLOAT, [1, 4, 1]), t("axis", TP.INT64, [])],
                     [t("y", TP.FLOAT, [1, 3, 2])])
    save("seq_rfft.onnx", g, opset=20)
    n = H.make_node("DFT", ["x"], ["y"], name="dft0", inverse=1, onesided=1)
    g = H.make_graph([n], "irfft", [t("x", TP.FLOAT, [1, 3, 2])], [t("y", TP.FLOAT, [1, 4, 1])])
    save("seq_irfft.onnx", g, opset=20)


def flex():
    bias = NH.from_array(np.array([0, math.log(3)], np.float32).reshape(1, 1, 1, 2), "bias")
    mod = H.make_graph([H.make_node("Add", ["s", "bias"], ["s2"])], "score_mod",
                       [t("s", TP.FLOAT, [1, 1, 1, 2])], [t("s2", TP.FLOAT, [1, 1, 1, 2])], [bias])
    n = H.make_node("FlexAttention", ["q", "k", "v"], ["y"], name="fa0", domain="ai.onnx.preview",
                    score_mod=mod)
    g = H.make_graph([n], "flex", [t("q", TP.FLOAT, [1, 1, 1, 2]), t("k", TP.FLOAT, [1, 1, 2, 2]),
                                   t("v", TP.FLOAT, [1, 1, 2, 1])], [t("y", TP.FLOAT, [1, 1, 1, 1])])
    save("seq_flex.onnx", g, preview=True, check=False)
    n = H.make_node("Foo", ["q"], ["y"], name="f0", domain="ai.onnx.preview")
    g = H.make_graph([n], "foo", [t("q", TP.FLOAT, [1])], [t("y", TP.FLOAT, [1])])
    save("seq_preview_unknown.onnx", g, preview=True, check=False)


def linear_attention():
    n = H.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], name="la0", update_rule="linear",
                    q_num_heads=1, kv_num_heads=1, scale=1.0)
    ins = [t(x, TP.FLOAT, [1, 2, 1]) for x in "qkv"]
    g = H.make_graph([n], "la", ins, [t("y", TP.FLOAT, [1, 2, 1]), t("state", TP.FLOAT, [1, 1, 1, 1])])
    save("seq_linear_attention.onnx", g)
    ins = [t(x, TP.FLOAT, ["B", "T", 1]) for x in "qkv"]
    g = H.make_graph([n], "la", ins, [t("y", TP.FLOAT, ["B", "T", 1]), t("state", TP.FLOAT, ["B", 1, 1, 1])])
    save("seq_la_unknown_length.onnx", g)


def lists():
    # sequences inside one graph (onnx_list.c): x [6, 4] split [1, 2, 3]; y appended;
    # the second piece erased (position -3); concatenated: x's rows 0, 3, 4, 5 and y;
    # its length 3; a run-time position k into (y, z); (y, z) stacked on a new axis 1
    split = NH.from_array(np.array([1, 2, 3], np.int64), "split")
    pos = NH.from_array(np.array(-3, np.int64), "pos")
    nodes = [
        H.make_node("SplitToSequence", ["x", "split"], ["s"], axis=0),
        H.make_node("SequenceInsert", ["s", "y"], ["s2"]),
        H.make_node("SequenceErase", ["s2", "pos"], ["s3"]),
        H.make_node("ConcatFromSequence", ["s3"], ["c"], axis=0),
        H.make_node("SequenceLength", ["s3"], ["n"]),
        H.make_node("SequenceConstruct", ["y", "z"], ["u"]),
        H.make_node("Identity", ["u"], ["u2"]),
        H.make_node("SequenceAt", ["u2", "k"], ["d"]),
        H.make_node("ConcatFromSequence", ["u"], ["st"], axis=1, new_axis=1),
    ]
    g = H.make_graph(nodes, "lists", [t("x", TP.FLOAT, [6, 4]), t("y", TP.FLOAT, [1, 4]), t("z", TP.FLOAT, [1, 4]),
                                      t("k", TP.INT64, [])],
                     [t("c", TP.FLOAT, [5, 4]), t("n", TP.INT64, []), t("d", TP.FLOAT, [1, 4]),
                      t("st", TP.FLOAT, [1, 2, 4])], [split, pos])
    save("seq_lists.onnx", g)
    # a sequence may not leave its graph
    g = H.make_graph([H.make_node("SequenceConstruct", ["y"], ["u"])], "out", [t("y", TP.FLOAT, [1, 4])],
                     [H.make_tensor_sequence_value_info("u", TP.FLOAT, [1, 4])])
    save("seq_list_out.onnx", g)


if __name__ == "__main__":
    causal_conv()
    dft()
    flex()
    linear_attention()
    lists()
