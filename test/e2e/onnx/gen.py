# test/e2e/onnx/gen.py — writes named.onnx, the small model test/e2e/extra.sh
# runs by name: inputs and outputs named the way exporters name them ('/', ':',
# '.'), one rank-0 input. Run by hand (build/onnx-venv/bin/python); the .onnx
# is committed so that `make test` needs no Python.
import os

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x:0", TensorProto.FLOAT, [2, 3])
s = helper.make_tensor_value_info("scale/factor", TensorProto.FLOAT, [])
y = helper.make_tensor_value_info("y/out:0", TensorProto.FLOAT, [2, 3])
z = helper.make_tensor_value_info("z.plus", TensorProto.FLOAT, [2, 3])
graph = helper.make_graph(
    [
        helper.make_node("Mul", ["x:0", "scale/factor"], ["y/out:0"], name="mul"),
        helper.make_node("Add", ["x:0", "x:0"], ["z.plus"], name="add"),
    ],
    "named",
    [x, s],
    [y, z],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tfvm-test")
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "named.onnx"))
