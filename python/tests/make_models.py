"""Makes the ONNX models of the Python tests (tests/models/*.onnx) and the
weights they hold (tests/models/weights.npz, for NumPy references). Needs the
onnx package; the tests themselves do not (the models are committed).
Run: python make_models.py"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
rng = np.random.default_rng(26)
W1 = rng.standard_normal((4, 5)).astype(np.float32)
B1 = rng.standard_normal((5,)).astype(np.float32)
W2 = rng.standard_normal((8, 6)).astype(np.float32)
B2 = rng.standard_normal((6,)).astype(np.float32)


def save(graph, name, **meta):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tfvm-tests",
                              **meta)
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


# static.onnx: y = softmax(relu(x @ W1 + B1)), x: f32[3, 4]
save(helper.make_graph(
    [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "B1"], ["a"]),
     helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=1)],
    "static", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
    [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(B1, "B1")]), "static.onnx",
    doc_string="a static-shape test model", domain="tfvm.test", model_version=3)
m = onnx.load(os.path.join(HERE, "static.onnx"))
helper.set_model_props(m, {"author": "issue 26"})
onnx.save(m, os.path.join(HERE, "static.onnx"))

# dynamic.onnx: y = tanh(x @ W2 + B2), z = mean(y, axis 1), x: f32[batch, 8]; two
# outputs, so that output_names can pick and reorder them
save(helper.make_graph(
    [helper.make_node("MatMul", ["x", "W2"], ["h"]), helper.make_node("Add", ["h", "B2"], ["a"]),
     helper.make_node("Tanh", ["a"], ["y"]), helper.make_node("ReduceMean", ["y"], ["z"], axes=[1], keepdims=0)],
    "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6]),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch"])],
    [numpy_helper.from_array(W2, "W2"), numpy_helper.from_array(B2, "B2")]), "dynamic.onnx")

# identity.onnx: y = x, x: f32[1] (the per-call overhead benchmark)
save(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]), "identity.onnx")

# ints.onnx: y = x + 1 (int64 [n]) and c = a constant output
save(helper.make_graph(
    [helper.make_node("Add", ["x", "one"], ["y"]),
     helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.arange(4, dtype=np.int64), "cv"))],
    "ints", [helper.make_tensor_value_info("x", TensorProto.INT64, ["n"])],
    [helper.make_tensor_value_info("y", TensorProto.INT64, ["n"]),
     helper.make_tensor_value_info("c", TensorProto.INT64, [4])],
    [numpy_helper.from_array(np.array([1], dtype=np.int64), "one")]), "ints.onnx")

np.savez(os.path.join(HERE, "weights.npz"), W1=W1, B1=B1, W2=W2, B2=B2)
