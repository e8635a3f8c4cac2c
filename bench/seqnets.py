#!/usr/bin/env python3
"""bench/seqnets.py — the transformer and recurrent models of `make bench`
(bench/ortmodels.sh, SET=seq): a BERT-like encoder
(transformers' BertModel from a small BertConfig), nn.TransformerEncoder,
2-layer nn.LSTM and nn.GRU (exported as ONNX LSTM/GRU ops), and a
torch.jit.script greedy decoder (a GRU-style cell fed its own argmax token,
until a stop token or L steps: an ONNX Loop with a data-dependent exit and
a ScatterND into its token buffer), random seeded weights (nothing is
downloaded), exported with torch.onnx.export at sequence lengths 8, 32 and
128, batch 1. Same commands as bench/convnets.py:

  seqnets.py build DIR [NAME...]   DIR/NAME_sL.onnx, NAME_sL.in.npy, NAME_sL.ort.npy
  seqnets.py ort FILE.onnx IN.npy T R W
  seqnets.py same A.npy B.npy
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convnets  # noqa: E402  (ort and same are shared)

LENGTHS = (8, 32, 128)
NAMES = ("bert", "transformer", "lstm", "gru", "decoder")
HIDDEN = 128


def model(name):
    import torch.nn as nn
    if name == "bert":
        from transformers import BertConfig, BertModel
        cfg = BertConfig(vocab_size=1000, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=4 * HIDDEN, max_position_embeddings=512)

        class Bert(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = BertModel(cfg, add_pooling_layer=False)

            def forward(self, ids):
                return self.m(input_ids=ids).last_hidden_state

        return Bert(), "ids"
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(HIDDEN, 4, 4 * HIDDEN, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), "x"
    if name in ("lstm", "gru"):
        rnn = (nn.LSTM if name == "lstm" else nn.GRU)(HIDDEN, HIDDEN, num_layers=2, batch_first=True)

        class Rnn(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = rnn

            def forward(self, x):
                return self.rnn(x)[0]

        return Rnn(), "x"
    raise SystemExit(f"seqnets.py: no model {name}")


def decoder(steps):
    """The scripted decoder of `steps` steps at most: h [1, HIDDEN] in, the
    tokens out. (GRUCell and chunk do not export from TorchScript: the gate
    math is spelled out.)"""
    import torch
    import torch.nn as nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(64, HIDDEN)
            self.wi = nn.Linear(HIDDEN, 3 * HIDDEN)
            self.wh = nn.Linear(HIDDEN, 3 * HIDDEN)
            self.out = nn.Linear(HIDDEN, 64)
            self.steps = steps
            self.hidden = HIDDEN

        def forward(self, h):
            toks = torch.zeros(self.steps, dtype=torch.long)
            tok = torch.zeros(1, dtype=torch.long)
            H = self.hidden
            for step in range(self.steps):
                gi = self.wi(self.emb(tok))
                gh = self.wh(h)
                r = torch.sigmoid(gi[:, 0:H] + gh[:, 0:H])
                z = torch.sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
                c = torch.tanh(gi[:, 2 * H:3 * H] + r * gh[:, 2 * H:3 * H])
                h = (1 - z) * c + z * h
                tok = self.out(h).argmax(dim=1)
                toks[step] = tok[0]
                if int(tok[0]) == 63:  # the stop token
                    break
            return toks

    torch.manual_seed(0)
    return torch.jit.script(Decoder().eval())


def build(d, names):
    import torch
    os.makedirs(d, exist_ok=True)
    for name in names:
        torch.manual_seed(0)
        m, kind = (None, "h") if name == "decoder" else model(name)
        if m is not None:
            m.eval()
        for L in LENGTHS:
            stem = os.path.join(d, f"{name}_s{L}")
            rng = np.random.default_rng(L)
            if kind == "h":
                m = decoder(L)
                x = rng.standard_normal((1, HIDDEN), dtype=np.float32)
            elif kind == "ids":
                x = rng.integers(0, 1000, (1, L), dtype=np.int64)
            else:
                x = rng.standard_normal((1, L, HIDDEN), dtype=np.float32)
            # with autograd on: under no_grad nn.TransformerEncoder takes a
            # fused fast path that the exporter cannot write
            torch.onnx.export(m, (torch.from_numpy(x),), stem + ".onnx", input_names=["input"],
                              output_names=["output"], opset_version=17, dynamo=False)
            np.save(stem + ".in.npy", x)
            y = convnets.session(stem + ".onnx", 1).run(None, {"input": x})[0]
            np.save(stem + ".ort.npy", y)
            print(stem + ".onnx")


def main(argv):
    if len(argv) >= 2 and argv[0] == "build":
        build(argv[1], argv[2:] or NAMES)
        return 0
    return convnets.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
