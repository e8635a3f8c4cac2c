#!/usr/bin/env python3
"""test/data/gen_kernels.py — makes the NumPy fixtures of the CPU tensor
kernels (test/data/kernels/) that test/unit/test_kernels.c checks against.

Each case is a line of kernels/cases.txt:
    NAME OP ATTR TOL N_IN
with inputs NAME.0.npy .. NAME.<N_IN-1>.npy and the expected result
NAME.out.npy. ATTR is the instruction's attribute (a signed axis, or option
bits: MATMUL ta=1 tb=2, REDUCE_* keepdims=1). TOL 0 means exact; otherwise
|got - want| <= TOL * (1 + |want|), NaN equal to NaN. Every expected value is
computed here with NumPy (conv and pooling by direct loops), never by tfvm.

    python3 test/data/gen_kernels.py      (writes test/data/kernels/; fixed seed)
"""
import os
import warnings

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
rng = np.random.default_rng(20260105)
cases = []


def case(name, op, attr, tol, inputs, out):
    for k, x in enumerate(inputs):
        np.save(os.path.join(OUT, f"{name}.{k}.npy"), np.array(x, order="C"))
    np.save(os.path.join(OUT, f"{name}.out.npy"), np.array(out, order="C"))
    cases.append(f"{name} {op} {attr} {tol} {len(inputs)}")


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(*shape):
    return rng.standard_normal(shape)


def ints(dtype, lo, hi, *shape):
    return rng.integers(lo, hi, size=shape).astype(dtype)


def vec(*v):
    return np.array(v, dtype=np.int64)


TF32 = "1e-5"
TF64 = "1e-12"

# ---- MATMUL ------------------------------------------------------------------
def mm(name, a, b, ta=False, tb=False, tol=None):
    aa = np.swapaxes(a, -1, -2) if ta else a
    bb = np.swapaxes(b, -1, -2) if tb else b
    if a.dtype.kind == "i":  # wrap exactly: int64 products mod 2^32 / exact int64 wrap
        want = np.matmul(aa.astype(np.int64), bb.astype(np.int64)).astype(a.dtype)
    else:
        want = np.matmul(aa.astype(np.float64), bb.astype(np.float64)).astype(a.dtype)
    t = tol or ("0" if a.dtype.kind == "i" else TF32 if a.dtype == np.float32 else TF64)
    case(name, "MATMUL", (1 if ta else 0) | (2 if tb else 0), t, [a, b], want)


mm("mm_f32", f32(3, 4), f32(4, 5))
mm("mm_f64", f64(2, 3), f64(3, 2))
mm("mm_ta", f32(4, 3), f32(4, 5), ta=True)
mm("mm_tb", f32(3, 4), f32(5, 4), tb=True)
mm("mm_tab", f64(4, 3), f64(5, 4), ta=True, tb=True)
mm("mm_batch_fold", f32(2, 3, 4, 5), f32(5, 6))
mm("mm_bcast", f32(2, 1, 3, 4), f32(5, 4, 2))
mm("mm_bcast_tt", f64(2, 1, 4, 3), f64(5, 2, 4), ta=True, tb=True)
mm("mm_b_batched", f32(3, 4), f32(2, 4, 3))
mm("mm_vec_mat", f32(4), f32(4, 5))
mm("mm_mat_vec", f32(3, 4), f32(4))
mm("mm_vec_vec", f64(4), f64(4))
mm("mm_vec_batch", f32(4), f32(2, 4, 3))
mm("mm_batch_vec", f32(2, 3, 4), f32(4))
mm("mm_row", f32(1, 5), f32(5, 7))
mm("mm_col", f64(6, 5), f64(5, 1))
mm("mm_row_ta", f32(5, 1), f32(5, 7), ta=True)
mm("mm_row_tb", f32(1, 5), f32(7, 5), tb=True)
mm("mm_col_ta", f32(5, 6), f32(5, 1), ta=True)
mm("mm_col_tb", f64(6, 5), f64(1, 5), tb=True)
mm("mm_big", f32(33, 65), f32(65, 17))
mm("mm_i32", ints(np.int32, -1000, 1000, 3, 4), ints(np.int32, -1000, 1000, 4, 5))
mm("mm_i32_wrap", ints(np.int32, 1 << 20, 1 << 30, 2, 3), ints(np.int32, 1 << 20, 1 << 30, 3, 2))
mm("mm_i32_tt", ints(np.int32, -9, 9, 2, 4, 3), ints(np.int32, -9, 9, 5, 4), ta=True, tb=True)
mm("mm_i64", ints(np.int64, -10**6, 10**6, 2, 3, 4), ints(np.int64, -10**6, 10**6, 2, 4, 2))
mm("mm_k0", np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32))
mm("mm_m0", np.zeros((0, 3), np.float64), f64(3, 4))
mm("mm_batch0", np.zeros((0, 2, 3), np.float32), f32(3, 4))
mm("mm_ones", f32(1, 1, 1), f32(1, 1))

# ---- CONV2D ------------------------------------------------------------------
def conv_ref(x, w, p):
    sh, sw, pt, pl, pb, pr, dh, dw, g = p
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    acc = np.int64 if x.dtype.kind == "i" else np.float64
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), acc)
    og = o // g
    for oc in range(o):
        gi = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, gi * cg:(gi + 1) * cg,
                           i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, oc, i, j] = (patch * w[oc].astype(acc)).sum(axis=(1, 2, 3))
    return out.astype(x.dtype)


def conv(name, x, w, p, tol=None):
    t = tol or ("0" if x.dtype.kind == "i" else TF32 if x.dtype == np.float32 else TF64)
    case(name, "CONV2D", 0, t, [x, w, vec(*p)], conv_ref(x, w, p))


conv("conv_basic", f32(2, 3, 7, 6), f32(4, 3, 3, 3), [1, 1, 0, 0, 0, 0, 1, 1, 1])
conv("conv_stride_pad", f32(1, 2, 8, 9), f32(3, 2, 3, 2), [2, 3, 1, 0, 2, 1, 1, 1, 1])
conv("conv_dilation", f32(1, 2, 9, 9), f32(2, 2, 3, 3), [1, 1, 2, 2, 2, 2, 2, 2, 1])
conv("conv_groups", f32(1, 4, 5, 5), f32(6, 2, 3, 3), [1, 1, 1, 1, 1, 1, 1, 1, 2])
conv("conv_depthwise", f64(2, 3, 5, 4), f64(3, 1, 3, 3), [1, 1, 1, 1, 1, 1, 1, 1, 3])
conv("conv_1x1", f32(2, 4, 3, 3), f32(5, 4, 1, 1), [1, 1, 0, 0, 0, 0, 1, 1, 1])
conv("conv_1x1_s2", f32(1, 3, 5, 5), f32(2, 3, 1, 1), [2, 2, 0, 0, 0, 0, 1, 1, 1])
conv("conv_f64_s2", f64(1, 2, 6, 7), f64(2, 2, 3, 3), [2, 2, 1, 2, 0, 1, 1, 2, 1])
conv("conv_big_pad", f32(1, 1, 2, 2), f32(1, 1, 3, 3), [1, 1, 2, 2, 2, 2, 1, 1, 1])
conv("conv_i32", ints(np.int32, -5, 5, 1, 2, 5, 5), ints(np.int32, -3, 3, 2, 2, 2, 2),
     [1, 2, 1, 0, 0, 1, 1, 1, 1])
conv("conv_i64_g", ints(np.int64, -5, 5, 1, 4, 4, 4), ints(np.int64, -3, 3, 4, 2, 2, 2),
     [1, 1, 0, 0, 0, 0, 1, 1, 2])
conv("conv_n0", np.zeros((0, 2, 4, 4), np.float32), f32(3, 2, 3, 3), [1, 1, 0, 0, 0, 0, 1, 1, 1])
conv("conv_c0", np.zeros((1, 0, 4, 4), np.float32), np.zeros((3, 0, 3, 3), np.float32),
     [1, 1, 0, 0, 0, 0, 1, 1, 1])

# ---- Pooling -----------------------------------------------------------------
def pool_ref(x, p, kind):
    kh, kw, sh, sw, pt, pl, pb, pr = p
    n, c, h, w = x.shape
    oh = (h + pt + pb - kh) // sh + 1
    ow = (w + pl + pr - kw) // sw + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * sh - pt, j * sw - pl
            win = x[:, :, max(h0, 0):min(h0 + kh, h), max(w0, 0):min(w0 + kw, w)]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                out[:, :, i, j] = win.astype(np.float64).mean(axis=(2, 3))
    return out


def pool(name, op, x, p):
    t = "0" if op == "MAXPOOL" else TF32 if x.dtype == np.float32 else TF64
    case(name, op, 0, t, [x, vec(*p)], pool_ref(x, p, "max" if op == "MAXPOOL" else "avg"))


pool("maxpool_basic", "MAXPOOL", f32(1, 2, 6, 6), [2, 2, 2, 2, 0, 0, 0, 0])
pool("maxpool_pad", "MAXPOOL", f32(2, 1, 5, 7), [3, 3, 2, 2, 1, 1, 1, 1])
pool("maxpool_asym", "MAXPOOL", f64(1, 2, 4, 5), [3, 2, 1, 1, 1, 0, 0, 1])
pool("maxpool_i32", "MAXPOOL", ints(np.int32, -100, 100, 1, 3, 5, 5), [2, 3, 1, 2, 0, 1, 1, 0])
pool("maxpool_i64", "MAXPOOL", ints(np.int64, -100, 100, 1, 1, 3, 3), [3, 3, 1, 1, 1, 1, 1, 1])
pool("avgpool_basic", "AVGPOOL", f32(1, 2, 6, 6), [2, 2, 2, 2, 0, 0, 0, 0])
pool("avgpool_pad", "AVGPOOL", f32(2, 2, 5, 5), [3, 3, 2, 2, 1, 1, 1, 1])
pool("avgpool_f64", "AVGPOOL", f64(1, 1, 4, 6), [2, 3, 1, 2, 1, 2, 0, 1])

# ---- SOFTMAX -----------------------------------------------------------------
def softmax_ref(x, axis):
    y = x.astype(np.float64)
    e = np.exp(y - y.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def softmax(name, x, axis):
    case(name, "SOFTMAX", axis, TF32 if x.dtype == np.float32 else TF64, [x], softmax_ref(x, axis))


softmax("softmax_last", f32(3, 5), -1)
softmax("softmax_first", f32(3, 5), 0)
softmax("softmax_mid", f64(2, 3, 4), 1)
softmax("softmax_big", (f32(2, 6) * 1000).astype(np.float32), 1)
softmax("softmax_vec", f64(7), 0)
softmax("softmax_one", f32(4, 1), 1)

# ---- Reductions --------------------------------------------------------------
def reduce(name, op, x, axes, keep=False):
    ax = tuple(axes) if axes else None
    if op == "REDUCE_SUM":
        if x.dtype.kind == "i":
            want = x.astype(np.int64).sum(axis=ax, keepdims=keep).astype(x.dtype)
        else:
            want = x.astype(np.float64).sum(axis=ax, keepdims=keep).astype(x.dtype)
    elif op == "REDUCE_MEAN":
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = x.astype(np.float64).mean(axis=ax, keepdims=keep).astype(x.dtype)
    else:
        want = x.max(axis=ax, keepdims=keep)
    t = "0" if x.dtype.kind == "i" or op == "REDUCE_MAX" else TF32 if x.dtype == np.float32 else TF64
    case(name, op, 1 if keep else 0, t, [x, vec(*axes)], want)


reduce("sum_axis1", "REDUCE_SUM", f32(2, 3, 4), [1])
reduce("sum_axis1_keep", "REDUCE_SUM", f32(2, 3, 4), [1], keep=True)
reduce("sum_axes02", "REDUCE_SUM", f64(2, 3, 4), [0, 2])
reduce("sum_neg", "REDUCE_SUM", f32(2, 3, 4), [-1, 0], keep=True)
reduce("sum_all", "REDUCE_SUM", f32(3, 4), [])
reduce("sum_all_keep", "REDUCE_SUM", f64(3, 4), [], keep=True)
reduce("sum_i32_wrap", "REDUCE_SUM", ints(np.int32, 1 << 29, 1 << 30, 4, 6), [0])
reduce("sum_i64", "REDUCE_SUM", ints(np.int64, -10**12, 10**12, 3, 2, 5), [1, 2])
reduce("sum_empty", "REDUCE_SUM", np.zeros((0, 3), np.float32), [0])
reduce("sum_size1", "REDUCE_SUM", f32(1, 4, 1), [0, 2])
reduce("mean_last", "REDUCE_MEAN", f32(3, 7), [-1])
reduce("mean_all", "REDUCE_MEAN", f64(2, 2, 3), [])
reduce("mean_empty", "REDUCE_MEAN", np.zeros((0, 3), np.float32), [0])
reduce("max_keep", "REDUCE_MAX", f64(2, 3, 4), [0, 1], keep=True)
reduce("max_i32", "REDUCE_MAX", ints(np.int32, -50, 50, 4, 5), [1])
reduce("max_f32_all", "REDUCE_MAX", f32(5, 3), [])
reduce("max_kept_empty", "REDUCE_MAX", np.zeros((2, 0), np.float32), [0])
x = f32(3, 4)
x[1, 2] = np.nan
reduce("max_nan", "REDUCE_MAX", x, [1])

# ---- ARGMAX ------------------------------------------------------------------
def argmax(name, x, axis):
    case(name, "ARGMAX", axis, "0", [x], np.argmax(x, axis=axis).astype(np.int64))


argmax("argmax_rows", f32(3, 4), 1)
argmax("argmax_cols", f64(3, 4), 0)
argmax("argmax_last", f32(2, 3, 4), -1)
argmax("argmax_ties", np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.int32), 1)
argmax("argmax_i64", ints(np.int64, -5, 5, 4, 3), 0)
argmax("argmax_bool", np.array([[False, True, True], [False, False, False]]), 1)
argmax("argmax_vec", f32(6), 0)
x = f32(2, 5)
x[0, 3] = np.nan
x[1, 1] = np.nan
x[1, 4] = np.nan
argmax("argmax_nan", x, 1)

# ---- Shape ops ---------------------------------------------------------------
x = f32(2, 3, 4)
case("reshape_infer", "RESHAPE", 0, "0", [x, vec(4, -1)], x.reshape(4, -1))
case("reshape_flat", "RESHAPE", 0, "0", [x, vec(24)], x.reshape(24))
x = ints(np.int64, 0, 9, 1, 1)
case("reshape_scalar", "RESHAPE", 0, "0", [x, vec()], x.reshape(()))
x = ints(np.int32, 0, 100, 2, 3, 4)
case("transpose_3d", "TRANSPOSE", 0, "0", [x, vec(2, 0, 1)], np.transpose(x, (2, 0, 1)))
x = f64(40, 50)
case("transpose_2d", "TRANSPOSE", 0, "0", [x, vec(1, 0)], x.T)
x = rng.integers(0, 2, size=(3, 1, 4)).astype(bool)
case("transpose_neg", "TRANSPOSE", 0, "0", [x, vec(-1, 0, 1)], np.transpose(x, (2, 0, 1)))
x = f32(2, 3, 5, 4)
case("transpose_4d", "TRANSPOSE", 0, "0", [x, vec(0, 2, 1, 3)], np.transpose(x, (0, 2, 1, 3)))
a, b = f32(2, 3), f32(4, 3)
case("concat_0", "CONCAT", 0, "0", [a, b], np.concatenate([a, b], 0))
a, b = ints(np.int64, 0, 9, 2, 3, 2), ints(np.int64, 0, 9, 2, 1, 2)
case("concat_1", "CONCAT", 1, "0", [a, b], np.concatenate([a, b], 1))
a, b = np.array([[True], [False]]), np.array([[False, False], [True, True]])
case("concat_neg", "CONCAT", -1, "0", [a, b], np.concatenate([a, b], -1))
a, b = np.zeros((0, 3), np.float32), f32(2, 3)
case("concat_empty", "CONCAT", 0, "0", [a, b], np.concatenate([a, b], 0))
x = ints(np.int32, 0, 100, 5, 6)
case("slice_neg", "SLICE", 0, "0", [x, vec(1, -3), vec(4, 100)], x[1:4, -3:100])
case("slice_clamp", "SLICE", 0, "0", [x, vec(-100, 2), vec(-1, -1)], x[-100:-1, 2:-1])
case("slice_lead", "SLICE", 0, "0", [x, vec(2), vec(3)], x[2:3])
case("slice_empty", "SLICE", 0, "0", [x, vec(4, 0), vec(2, 6)], x[4:2, 0:6])
x = f64(3, 4, 5)
case("slice_3d", "SLICE", 0, "0", [x, vec(0, 1, 1), vec(3, 3, 4)], x[0:3, 1:3, 1:4])
x = f32(5, 3)
idx = np.array([[0, 4], [-1, 2]], np.int64)
case("gather_0", "GATHER", 0, "0", [x, idx], np.take(x, idx, axis=0))
x = ints(np.int64, 0, 100, 2, 4, 3)
idx = np.array([3, 0, -4, 1, 1], np.int32)
case("gather_1", "GATHER", 1, "0", [x, idx], np.take(x, idx, axis=1))
idx = np.array(2, np.int64)
case("gather_scalar", "GATHER", -1, "0", [x, idx], np.take(x, idx, axis=-1))
x = f32(2, 3)
case("pad_2d", "PAD", 0, "0", [x, vec(1, 0, 2, 1)], np.pad(x, ((1, 2), (0, 1))))
x = rng.integers(0, 2, size=(2, 1, 3)).astype(bool)
case("pad_bool", "PAD", 0, "0", [x, vec(0, 2, 1, 1, 0, 0)], np.pad(x, ((0, 1), (2, 0), (1, 0))))

# ---- RANGE -------------------------------------------------------------------
def arange(name, dt, start, limit, delta, tol="0"):
    s, l, d = (np.array(v, dt) for v in (start, limit, delta))
    case(name, "RANGE", 0, tol, [s, l, d], np.arange(s, l, d, dtype=dt))


arange("range_i32", np.int32, 0, 10, 3)
arange("range_i64_down", np.int64, 5, -7, -4)
arange("range_i64_empty", np.int64, 5, 5, 1)
arange("range_f32", np.float32, 0, 1, 0.1, TF32)
arange("range_f64", np.float64, 1.5, 3.2, 0.25)
arange("range_f64_down", np.float64, 1.0, -1.0, -0.3, TF64)

# ---- Elementwise math (dev_cpu_elementwise) ----------------------------------
x32, x64 = f32(3, 4) * 4, f64(2, 5) * 4
pos32, pos64 = np.abs(x32) + np.float32(0.01), np.abs(x64) + 0.01
with np.errstate(over="ignore"):
    for nm, fn, a32, a64 in [
        ("relu", lambda v: np.maximum(v, 0), x32, x64),
        ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), x32, x64),
        ("tanh", np.tanh, x32, x64),
        ("exp", np.exp, x32, x64),
        ("log", np.log, pos32, pos64),
        ("sqrt", np.sqrt, pos32, pos64),
    ]:
        op = nm.upper()
        case(f"{nm}_f32", op, 0, TF32, [a32], fn(a32.astype(np.float64)).astype(np.float32))
        case(f"{nm}_f64", op, 0, TF64, [a64], fn(a64))
xi = ints(np.int32, -5, 5, 7)
case("relu_i32", "RELU", 0, "0", [xi], np.maximum(xi, 0))

if __name__ == "__main__":
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("# made by test/data/gen_kernels.py: NAME OP ATTR TOL N_IN\n")
        f.write("\n".join(cases) + "\n")
    print(f"{len(cases)} cases in {OUT}")
