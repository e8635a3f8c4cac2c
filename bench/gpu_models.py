#!/usr/bin/env python3
"""bench/gpu_models.py — the model part of `make gpu-check` (test/gpu/check.sh),
run by the GPU machine's own python3 (which has torch with CUDA): the model
bench's resnet18 (bench/convnets.py) and BERT-like encoder (bench/seqnets.py,
sequence length 128) at batch 1 and 32, random seeded weights, exported with
torch.onnx.export for tfvm and timed in PyTorch CUDA eager.

  gpu_models.py build DIR          DIR/NAME_bB.onnx and NAME_bB.in.npy; prints one
                                   line per model: "ok NAME" or "skip NAME: why"
  gpu_models.py torch DIR NAME_bB R W
                                   PyTorch eager on the GPU, under no_grad: W
                                   warm-up runs, R timed (synchronized); prints
                                   "MEDIAN MIN" in seconds
  gpu_models.py same A.npy B.npy   as bench/convnets.py same
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convnets  # noqa: E402
import seqnets  # noqa: E402

BATCHES = (1, 32)
SEQ = 128


def make(name):
    """The model and an input maker for batch b."""
    import torch
    torch.manual_seed(0)
    if name == "resnet18":
        m = convnets.model(name)
        convnets.randomize_bn(m)
        return m, lambda b: np.random.default_rng(b).standard_normal((b, 3, 224, 224), dtype=np.float32)
    m, _ = seqnets.model("bert")
    return m, lambda b: np.random.default_rng(b).integers(0, 1000, (b, SEQ), dtype=np.int64)


def build(d):
    import torch
    os.makedirs(d, exist_ok=True)
    for name in ("resnet18", "bert"):
        try:
            m, inp = make(name)
            m.eval()
            for b in BATCHES:
                stem = os.path.join(d, f"{name}_b{b}")
                x = inp(b)
                torch.onnx.export(m, (torch.from_numpy(x),), stem + ".onnx", input_names=["input"],
                                  output_names=["output"], opset_version=17, dynamo=False)
                np.save(stem + ".in.npy", x)
            print(f"ok {name}")
        except Exception as e:  # a missing torchvision or transformers: said, not fatal
            print(f"skip {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def torch_time(d, stem, runs, warmup):
    import torch
    name = stem.rsplit("_b", 1)[0]
    m, _ = make(name)
    m = m.eval().cuda()
    x = torch.from_numpy(np.load(os.path.join(d, stem + ".in.npy"))).cuda()
    ts = []
    with torch.no_grad():
        for r in range(warmup + runs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            m(x)
            torch.cuda.synchronize()
            if r >= warmup:
                ts.append(time.perf_counter() - t0)
    print(f"{statistics.median(ts):.6f} {min(ts):.6f}")


def main(argv):
    if len(argv) == 2 and argv[0] == "build":
        build(argv[1])
        return 0
    if len(argv) == 5 and argv[0] == "torch":
        torch_time(argv[1], argv[2], int(argv[3]), int(argv[4]))
        return 0
    if len(argv) == 3 and argv[0] == "same":
        return convnets.same(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
