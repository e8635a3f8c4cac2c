# test/e2e/t5/gen.py — writes t5_enc.onnx, a T5-like encoder (transformers'
# T5EncoderModel from a tiny T5Config: d_model 16, 1 layer, 2 heads, 8
# relative-position buckets, random weights seeded 0) exported by
# torch.onnx.export with dynamic axes `batch` and `seq`, and for one input
# t5_2x7.in.npy onnxruntime's output t5_2x7.ort.npy. Its relative-position
# buckets take log(0) = -inf, cast it to int64 and drop it with Where: what
# test/e2e/t5.sh checks. Run by hand with a Python that has torch,
# transformers and onnxruntime; the files are committed so that `make test`
# needs no Python.
import os
import sys

import numpy as np
import torch
from transformers import T5Config, T5EncoderModel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "dyn"))
from gen import export_dynamic  # noqa: E402  (test/e2e/dyn/gen.py)


class T5(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = T5Config(vocab_size=50, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                       relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0)
        self.m = T5EncoderModel(cfg)

    def forward(self, ids):
        return self.m(input_ids=ids).last_hidden_state


def main():
    torch.manual_seed(0)
    sess = export_dynamic(T5().eval(), os.path.join(HERE, "t5_enc.onnx"))
    ids = np.random.default_rng(0).integers(0, 50, (2, 7), dtype=np.int64)
    np.save(os.path.join(HERE, "t5_2x7.in.npy"), ids)
    np.save(os.path.join(HERE, "t5_2x7.ort.npy"), sess.run(None, {"ids": ids})[0])


if __name__ == "__main__":
    main()
