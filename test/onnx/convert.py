"""test/onnx/convert.py OUT — every ONNX backend node case as a directory of
.npy files that the C conformance runner reads without protobuf or Python:
OUT/CASE/model.onnx, in_K.npy / out_K.npy in graph order, and meta.txt:
  ops A B ...              every op type of the model, subgraphs included
  input NAME in_K.npy      one line per non-initializer graph input
  output NAME out_K.npy    one line per graph output
  skip REASON              the case cannot be expressed in .npy (sequences,
                           optionals, dtypes .npy readers here do not take)"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

NPY_OK = {np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "uint16", "uint32", "uint64", "int32", "int64",
                                 "float16", "float32", "float64")}


def bf16_dtype():
    """ml_dtypes' bfloat16 (saved as '<V2', which tfvm reads as bf16), if installed."""
    try:
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return None


def ops_of(graph, acc):
    for n in graph.node:
        acc.add(n.op_type if n.domain in ("", "ai.onnx") else n.domain + ":" + n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops_of(a.g, acc)
            for g in a.graphs:
                ops_of(g, acc)
    return acc


def load_pb(path, vi):
    data = open(path, "rb").read()
    kind = vi.type.WhichOneof("value") if vi is not None else "tensor_type"
    if kind != "tensor_type":
        return None, "input/output " + (vi.name if vi is not None else "?") + " is a " + str(kind)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    a = numpy_helper.to_array(t)
    if a.dtype not in NPY_OK and a.dtype != bf16_dtype():
        return None, "dtype " + str(a.dtype)
    return np.ascontiguousarray(a), None


def convert(src, dst):
    model = onnx.load(os.path.join(src, "model.onnx"))
    g = model.graph
    inits = {t.name for t in g.initializer}
    ins = [vi for vi in g.input if vi.name not in inits]
    meta = ["ops " + " ".join(sorted(ops_of(g, set())))]
    ds = os.path.join(src, "test_data_set_0")
    os.makedirs(dst)
    shutil.copy(os.path.join(src, "model.onnx"), os.path.join(dst, "model.onnx"))
    skip = None
    for kind, vis in (("input", ins), ("output", list(g.output))):
        k = 0
        while os.path.exists(os.path.join(ds, "%s_%d.pb" % (kind, k))):
            vi = vis[k] if k < len(vis) else None
            a, why = load_pb(os.path.join(ds, "%s_%d.pb" % (kind, k)), vi)
            name = vi.name if vi is not None else "%s%d" % (kind, k)
            if a is None:
                skip = skip or why
            else:
                fn = "%s_%d.npy" % ("in" if kind == "input" else "out", k)
                np.save(os.path.join(dst, fn), a, allow_pickle=False)
                meta.append("%s %s %s" % (kind, name, fn))
            k += 1
        if kind == "input" and k != len(vis) and skip is None:
            skip = "%d input files for %d graph inputs" % (k, len(vis))
    if skip:
        meta.append("skip " + skip)
    with open(os.path.join(dst, "meta.txt"), "w") as f:
        f.write("\n".join(meta) + "\n")


# The wheel's case folders, and the prefix of their cases' names here: the
# node cases as they are, the model cases converted from PyTorch after their
# folder's name ("pytorch-converted.test_Conv3d").
SUITES = (("node", ""), ("pytorch-converted", "pytorch-converted."), ("pytorch-operator", "pytorch-operator."))


def main():
    out = sys.argv[1]
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    os.makedirs(out)
    counts = []
    for folder, prefix in SUITES:
        root = os.path.join(data, folder)
        n = 0
        for case in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            src = os.path.join(root, case)
            if not os.path.exists(os.path.join(src, "model.onnx")):
                continue
            dst = os.path.join(out, prefix + case)
            try:
                convert(src, dst)
            except Exception as e:  # a case this converter cannot read is listed, not fatal
                os.makedirs(dst, exist_ok=True)
                with open(os.path.join(dst, "meta.txt"), "w") as f:
                    f.write("skip converter: %s\n" % str(e).splitlines()[0][:200])
            n += 1
        counts.append("%d %s" % (n, folder))
    print("convert.py: %s cases" % ", ".join(counts))


if __name__ == "__main__":
    main()
