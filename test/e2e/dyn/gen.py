# test/e2e/dyn/gen.py — writes bert_dyn.onnx, a BERT-like model (transformers'
# BertModel from a tiny BertConfig: hidden 16, 1 layer, random weights seeded
# 0) exported by torch.onnx.export with dynamic axes 'batch' and 'seq' on its
# input and output, WITHOUT onnx.shape_inference; and for each (batch, seq) of
# PAIRS the input bert_BxS.in.npy and onnxruntime's output bert_BxS.ort.npy.
# test/e2e/extra.sh compiles the model once and runs it on every pair. Run by
# hand with a Python that has torch, transformers and onnxruntime; the files
# are committed so that `make test` needs no Python.
import os

import numpy as np
import onnxruntime as ort
import torch
from transformers import BertConfig, BertModel

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = ((1, 5), (2, 8), (3, 13))


class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=32)
        self.m = BertModel(cfg, add_pooling_layer=False)

    def forward(self, ids):
        return self.m(input_ids=ids).last_hidden_state


def export_dynamic(m, path):
    """m (ids -> hidden) exported with dynamic axes batch and seq; its onnxruntime session"""
    x = torch.zeros((2, 7), dtype=torch.int64)
    torch.onnx.export(m, (x,), path, input_names=["ids"], output_names=["hidden"], opset_version=17,
                      dynamo=False, dynamic_axes={"ids": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}})
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def main():
    torch.manual_seed(0)
    sess = export_dynamic(Bert().eval(), os.path.join(HERE, "bert_dyn.onnx"))
    rng = np.random.default_rng(0)
    for b, s in PAIRS:
        ids = rng.integers(0, 50, (b, s), dtype=np.int64)
        np.save(os.path.join(HERE, f"bert_{b}x{s}.in.npy"), ids)
        np.save(os.path.join(HERE, f"bert_{b}x{s}.ort.npy"), sess.run(None, {"ids": ids})[0])


if __name__ == "__main__":
    main()
