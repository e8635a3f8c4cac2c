"""bench/python_bench.py — the Python rows of `make bench` (bench/python.sh),
run by the venv that has the tfvm package (and onnxruntime, when PyPI had it).

  overhead MODEL THREADS   per-call microseconds of session.run on MODEL (a
                           1-element Identity), tfvm and ONNX Runtime
                           alternating, best of 7 rounds: "tfvm_us ort_us"
                           (ort_us "-" without onnxruntime)
  model DIR NAME THREADS RUNS WARMUP
                           median seconds of tfvm's InferenceSession.run on
                           DIR/NAME.onnx with DIR/NAME.in*.npy (bench/onnx_models.py)
"""
import os
import statistics
import sys
import time
import timeit

import numpy as np

import tfvm


def overhead(model, threads):
    so = tfvm.SessionOptions()
    so.intra_op_num_threads = threads
    sessions = {"tfvm": tfvm.InferenceSession(model, so)}
    try:
        import onnxruntime as ort
        o = ort.SessionOptions()
        o.intra_op_num_threads = threads
        o.inter_op_num_threads = 1
        sessions["ort"] = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
    except ImportError:
        pass
    feed = {"x": np.ones(1, np.float32)}
    best = {k: float("inf") for k in sessions}
    n = 20000
    for _ in range(7):
        for k, s in sessions.items():
            run = s.run
            best[k] = min(best[k], timeit.timeit(lambda: run(None, feed), number=n) / n)
    ort_us = f"{best['ort'] * 1e6:.3f}" if "ort" in best else "-"
    print(f"{best['tfvm'] * 1e6:.3f} {ort_us}")


def model(d, name, threads, runs, warmup):
    so = tfvm.SessionOptions()
    so.intra_op_num_threads = threads
    sess = tfvm.InferenceSession(os.path.join(d, name + ".onnx"), so)
    feeds = {i.name: np.load(os.path.join(d, f"{name}.in{k}.npy")) for k, i in enumerate(sess.get_inputs())}
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    print(f"{statistics.median(times):.6f}")


def main():
    a = sys.argv[1:]
    if a[:1] == ["overhead"] and len(a) == 3:
        overhead(a[1], int(a[2]))
    elif a[:1] == ["model"] and len(a) == 6:
        model(a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
