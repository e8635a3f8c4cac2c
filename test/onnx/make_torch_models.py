"""test/onnx/make_torch_models.py — models as torch.onnx exports them, for
test_onnx.c (run with a Python that has torch and onnx; the files it writes
are committed, tests never run it):
  scripted_scatter.onnx  a TorchScript loop writing toks[step] = tok[0]: a
                         ScatterND into a loop-carried buffer whose length is
                         known only at run time (n), index tuples [1, 1]
"""
import os

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")


class Decode(torch.nn.Module):
    def forward(self, x, n: int):
        toks = torch.zeros(n, dtype=torch.long)
        tok = x
        for step in range(n):
            tok = (tok * 3 + 1) % 7
            toks[step] = tok[0]
        return toks


def scripted_scatter():
    m = torch.jit.script(Decode())
    x = torch.tensor([2, 5], dtype=torch.long)
    assert m(x, 5).tolist() == [0, 1, 4, 6, 5]  # what test_onnx.c expects
    torch.onnx.export(m, (x, 5), os.path.join(OUT, "scripted_scatter.onnx"), input_names=["x", "n"],
                      output_names=["toks"], dynamo=False, opset_version=17)


if __name__ == "__main__":
    scripted_scatter()
