#!/usr/bin/env python3
"""bench/convnets.py — the convolution networks of `make bench`
(bench/ortmodels.sh, SET=conv): torchvision architectures and one of our own, built with
random seeded weights (nothing is downloaded), exported with
torch.onnx.export, and ONNX Runtime's time and memory on them. Runs inside
build/bench-venv (torch, torchvision, onnx, onnxruntime, numpy).

  convnets.py build DIR [NAME...]   any torchvision model name, dwsilu (ours) or
                                    stage4conv (resnet18's last 3x3 convolution alone):
                                    write DIR/NAME_bB.onnx, its input NAME_bB.in.npy
                                    and ORT's output NAME_bB.ort.npy for batch B in
                                    1 and 8; prints the files it wrote
  convnets.py ort FILE.onnx IN.npy T R W
                                    ORT with intra_op_num_threads=T, inter_op 1: W
                                    warm-up runs, then R runs of session.run; prints
                                    "MEDIAN MIN PEAK_RSS_KB"
  convnets.py same A.npy B.npy      equal shape, values within rtol 1e-3, atol 1e-4;
                                    prints the largest difference, fails when not
"""
import os
import resource
import statistics
import sys
import time

import numpy as np

BATCHES = (1, 8)


def dwsilu():
    """Our own ResNet-style network of depthwise/SiLU blocks (about
    EfficientNet-B0's first half at a smaller width)."""
    import torch.nn as nn

    class MBConv(nn.Module):
        """An inverted residual block in the EfficientNet style: 1x1 expand, SiLU,
        depthwise kxk (stride 1 or 2), SiLU, squeeze-excite, 1x1 project, and the
        residual add when the shape allows."""

        def __init__(self, cin, cout, expand, k, stride):
            super().__init__()
            mid = cin * expand
            self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU()) \
                if expand != 1 else nn.Identity()
            self.dw = nn.Sequential(nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False),
                                    nn.BatchNorm2d(mid), nn.SiLU())
            sq = max(1, cin // 4)
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, sq, 1), nn.SiLU(),
                                    nn.Conv2d(sq, mid, 1), nn.Sigmoid())
            self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.dw(self.expand(x))
            y = y * self.se(y)
            y = self.project(y)
            return x + y if self.residual else y

    layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU()]
    cfg = [(32, 16, 1, 3, 1), (16, 24, 6, 3, 2), (24, 24, 6, 3, 1), (24, 40, 6, 5, 2), (40, 40, 6, 5, 1),
           (40, 80, 6, 3, 2), (80, 80, 6, 3, 1), (80, 112, 6, 5, 1), (112, 192, 6, 5, 2)]
    layers += [MBConv(*c) for c in cfg]
    layers += [nn.Conv2d(192, 640, 1, bias=False), nn.BatchNorm2d(640), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
               nn.Flatten(), nn.Linear(640, 1000)]
    return nn.Sequential(*layers)


def model(name):
    import torch.nn as nn
    import torchvision.models as tvm
    if name == "dwsilu":
        return dwsilu()
    if name == "stage4conv":
        # resnet18's last-stage 3x3 convolution alone (512 -> 512 on 7x7),
        # whose GFLOP/s the bench prints
        return nn.Sequential(nn.Conv2d(512, 512, 3, padding=1), nn.ReLU())
    return getattr(tvm, name)(weights=None)


def input_shape(name, b):
    return (b, 512, 7, 7) if name == "stage4conv" else (b, 3, 224, 224)


def randomize_bn(m):
    """Give BatchNorm layers non-trivial statistics, as a trained model has
    (fresh ones are the identity, which would hide a wrong fold)."""
    import torch
    g = torch.Generator().manual_seed(7)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            n = mod.num_features
            mod.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            mod.weight.data.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(n, generator=g) * 0.1)


NAMES = ("resnet18", "mobilenet_v3_small", "dwsilu", "stage4conv")


def build(d, names):
    import torch
    os.makedirs(d, exist_ok=True)
    for name in names:
        torch.manual_seed(0)
        m = model(name)
        randomize_bn(m)
        m.eval()
        for b in BATCHES:
            stem = os.path.join(d, f"{name}_b{b}")
            x = torch.from_numpy(np.random.default_rng(b).standard_normal(input_shape(name, b), dtype=np.float32))
            with torch.no_grad():
                torch.onnx.export(m, (x,), stem + ".onnx", input_names=["input"], output_names=["output"],
                                  opset_version=17, dynamo=False)
            np.save(stem + ".in.npy", x.numpy())
            y = session(stem + ".onnx", 1).run(None, {"input": x.numpy()})[0]
            np.save(stem + ".ort.npy", y)
            print(stem + ".onnx")


def session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_time(path, inp, threads, runs, warmup):
    s = session(path, threads)
    feed = {s.get_inputs()[0].name: np.load(inp)}
    for _ in range(warmup):
        s.run(None, feed)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, feed)
        ts.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{statistics.median(ts):.6f} {min(ts):.6f} {rss}")


def same(a, b):
    x, y = np.load(a), np.load(b)
    if x.shape != y.shape:
        print(f"shapes {x.shape} and {y.shape}")
        return 1
    d = np.abs(x.astype(np.float64) - y)
    bad = d > 1e-4 + 1e-3 * np.abs(x)
    print(f"max abs diff {d.max():.3g}")
    return 1 if bad.any() else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "build":
        build(argv[1], argv[2:] or NAMES)
        return 0
    if len(argv) == 6 and argv[0] == "ort":
        ort_time(argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
        return 0
    if len(argv) == 3 and argv[0] == "same":
        return same(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
