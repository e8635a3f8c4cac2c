"""test/onnx/make_act_models.py — act_extreme.onnx for test/unit/test_onnx.c:
every composite activation the importer spells with compiler/decomp.h
(Softplus, Softsign, Mish, Elu, Selu, Celu, LeakyRelu, ThresholdedRelu,
HardSigmoid, HardSwish, Gelu both ways, Swish) on one f32 vector of extreme
inputs (+-inf, NaN, -0, 1e-30, ..., +-1e4), with onnxruntime's outputs beside
it: act_extreme.in.npy (the inputs) and act_extreme.out.npy (one row per
output, in the model's output order). Run by hand after changing it, with a
venv that has onnx and onnxruntime (build/bench-venv, bench/onnx_venv.sh):
    build/bench-venv/bin/python test/onnx/make_act_models.py"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as H

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")

X = np.array([-np.inf, -1e4, -1000, -104, -100, -89, -20, -17, -3, -1, -1e-3, -1e-30, -0.0, 0, 1e-30, 1e-3, 1, 3,
              17, 20, 89, 100, 104, 1000, 1e4, np.inf, np.nan], np.float32)

# (output, op, attributes); Swish is opset 24's, the rest are in opset 24 too
OPS = [("softplus", "Softplus", {}), ("softsign", "Softsign", {}), ("mish", "Mish", {}), ("elu", "Elu", {}),
       ("selu", "Selu", {}), ("celu", "Celu", {"alpha": 2.0}), ("leaky_relu", "LeakyRelu", {}),
       ("thresholded_relu", "ThresholdedRelu", {}), ("hard_sigmoid", "HardSigmoid", {}),
       ("hard_swish", "HardSwish", {}), ("gelu", "Gelu", {}), ("gelu_tanh", "Gelu", {"approximate": "tanh"}),
       ("swish", "Swish", {"alpha": 0.5})]


def main():
    nodes = [H.make_node(op, ["x"], [name], name=name, **at) for name, op, at in OPS]
    n = len(X)
    g = H.make_graph(nodes, "act_extreme", [H.make_tensor_value_info("x", TP.FLOAT, [n])],
                     [H.make_tensor_value_info(name, TP.FLOAT, [n]) for name, _, _ in OPS])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 24)], producer_name="tfvm-test")
    m.ir_version = 10
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, "act_extreme.onnx"))
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ys = s.run(None, {"x": X})
    np.save(os.path.join(OUT, "act_extreme.in.npy"), X)
    np.save(os.path.join(OUT, "act_extreme.out.npy"), np.stack(ys).astype(np.float32))


if __name__ == "__main__":
    main()
