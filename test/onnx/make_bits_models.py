"""test/onnx/make_bits_models.py — the small models of test/unit/test_onnx_bits.c
(import/onnx_bits.c: Unique's four outputs, Dropout with a run-time
training_mode, TensorScatter, MaxPool's Indices, and their errors), made with
the onnx helper (build/onnx-venv, see setup.sh) and committed under
test/onnx/models/bits_*.onnx. Run by hand after changing it:
    build/onnx-venv/bin/python test/onnx/make_bits_models.py
Values are chosen so that every expected output is known by hand."""
import os

import onnx
from onnx import TensorProto as TP
from onnx import helper as H

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")


def save(name, graph, opset=26, check=True):
    m = H.make_model(graph, opset_imports=[H.make_opsetid("", opset)], producer_name="tfvm-test")
    m.ir_version = 10
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name))


def t(name, elem, shape):
    return H.make_tensor_value_info(name, elem, shape)


def unique():
    n = H.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], name="u0", sorted=0)
    g = H.make_graph([n], "unique", [t("x", TP.FLOAT, [6])],
                     [t("y", TP.FLOAT, [None]), t("first", TP.INT64, [None]), t("inverse", TP.INT64, [6]),
                      t("counts", TP.INT64, [None])])
    save("bits_unique.onnx", g)


def dropout():
    n = H.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], name="d0", seed=3)
    g = H.make_graph([n], "dropout", [t("x", TP.FLOAT, [2, 3]), t("r", TP.FLOAT, []), t("t", TP.BOOL, [])],
                     [t("y", TP.FLOAT, [2, 3]), t("mask", TP.BOOL, [2, 3])])
    save("bits_dropout.onnx", g)


def bad_shift():
    n = H.make_node("BitShift", ["a", "b"], ["y"], name="sh0", direction="UP")
    g = H.make_graph([n], "bad", [t("a", TP.UINT8, [2]), t("b", TP.UINT8, [2])], [t("y", TP.UINT8, [2])])
    save("bits_bad_shift.onnx", g, check=False)


def bad_bitcast():
    n = H.make_node("BitCast", ["a"], ["y"], name="bc0", to=TP.DOUBLE)
    g = H.make_graph([n], "bad", [t("a", TP.FLOAT, [2])], [t("y", TP.DOUBLE, [2])])
    save("bits_bad_bitcast.onnx", g, check=False)


def bad_scatter_mode():
    n = H.make_node("TensorScatter", ["past", "upd"], ["y"], name="ts0", mode="ring")
    g = H.make_graph([n], "bad", [t("past", TP.FLOAT, [1, 4, 2]), t("upd", TP.FLOAT, [1, 1, 2])],
                     [t("y", TP.FLOAT, [1, 4, 2])])
    save("bits_bad_scatter_mode.onnx", g, check=False)


def maxpool_indices_same():
    n = H.make_node("MaxPool", ["x"], ["y", "i"], name="mp0", kernel_shape=[2, 2], auto_pad="SAME_UPPER")
    g = H.make_graph([n], "bad", [t("x", TP.FLOAT, [1, 1, 3, 3])],
                     [t("y", TP.FLOAT, [1, 1, 3, 3]), t("i", TP.INT64, [1, 1, 3, 3])])
    save("bits_maxpool_same.onnx", g, opset=22)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    unique()
    dropout()
    bad_shift()
    bad_bitcast()
    bad_scatter_mode()
    maxpool_indices_same()
