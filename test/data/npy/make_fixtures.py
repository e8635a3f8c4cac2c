# test/data/npy/make_fixtures.py — regenerates the .npy fixtures of
# test/unit/test_npy.c and test_elementwise.c with real NumPy. The tests never
# run this; the files it writes are checked in. Run from the repository root:
#   python3 test/data/npy/make_fixtures.py
import os

import numpy as np

D = os.path.join("test", "data", "npy")
fmt = np.lib.format


def save(name, arr, version=None):
    with open(os.path.join(D, name), "wb") as f:
        if version is None:
            np.save(f, arr)
        else:
            fmt.write_array(f, arr, version=version)


# Element k (C order) of every "good" fixture; test_npy.c computes the same.
def values(dtype, shape):
    n = int(np.prod(shape, dtype=np.int64))
    k = np.arange(n, dtype=np.int64)
    if dtype == "bool":
        v = (k % 3) == 0
    elif dtype == "i32":
        v = (7 * k - 20).astype("<i4")
    elif dtype == "i64":
        v = (k * 1000000007 - (1 << 40)).astype("<i8")
    elif dtype == "u8":
        v = ((k * 37 + 250) % 256).astype("|u1")
    elif dtype == "i8":
        v = ((k * 29 + 100) % 256 - 128).astype("|i1")
    elif dtype == "i16":
        v = (k * 517 - 3000).astype("<i2")
    elif dtype == "u16":
        v = ((k * 4099 + 60000) % 65536).astype("<u2")
    elif dtype == "u32":
        v = ((k * 2654435761 + 4000000000) % (1 << 32)).astype("<u4")
    elif dtype == "u64":
        v = k.astype("<u8") * np.uint64((1 << 61) + 3) + np.uint64(1 << 63)
    elif dtype == "f16":
        v = (k * 0.5 - 3.25).astype("<f2")
    elif dtype == "bf16":  # ml_dtypes' bfloat16, saved as '<V2'
        import ml_dtypes
        v = (k * 0.5 - 3.25).astype(np.float32).astype(ml_dtypes.bfloat16)
    elif dtype == "f32":
        v = (k * 0.5 - 3.25).astype("<f4")
    else:
        v = (k * 0.25 - 2.0).astype("<f8")
    return v.reshape(shape)


SHAPES = {"r0": (), "r1": (5,), "r2": (2, 3), "r3": (2, 3, 4), "e1": (0,), "e3": (2, 0, 3)}
for dt in ("bool", "i32", "i64", "f32", "f64", "u8", "i8", "i16", "u16", "u32", "u64", "f16", "bf16"):
    for tag, shape in SHAPES.items():
        save(f"{dt}_{tag}.npy", values(dt, shape))

save("f64_special.npy", np.array([np.nan, np.inf, -np.inf, -0.0, 1e308, 5e-324], "<f8"))
save("i32_limits.npy", np.array([-(2**31), 2**31 - 1, -1, 0], "<i4"))
save("v2.npy", values("f64", (2, 3)), version=(2, 0))
save("v3.npy", values("i32", (5,)), version=(3, 0))

# Files tfvm must refuse, each with its own message.
save("fortran.npy", np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)))
save("bigendian.npy", np.arange(4, dtype=">f4"))
save("complex.npy", np.array([1 + 2j, 3 - 4j], "<c16"))
save("structured.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
save("rank9.npy", np.zeros((1,) * 9, "<i4"))
save("f16.npy", np.arange(3, dtype="<f2"))  # tfvm reads it (npy_args.tfasm: not as f32)
full = open(os.path.join(D, "f64_r2.npy"), "rb").read()
hlen = 10 + int.from_bytes(full[8:10], "little")
open(os.path.join(D, "truncated.npy"), "wb").write(full[: hlen + 20])
open(os.path.join(D, "trailing.npy"), "wb").write(full + b"\0\0\0\0")
open(os.path.join(D, "header_cut.npy"), "wb").write(full[:40])
b = bytearray(open(os.path.join(D, "bool_r1.npy"), "rb").read())
b[-2] = 2
open(os.path.join(D, "badbool.npy"), "wb").write(bytes(b))
open(os.path.join(D, "notnpy.npy"), "wb").write(b"hello, world\n")

# Broadcasting cases for test_elementwise.c: inputs and NumPy's results.
a = (np.arange(24, dtype="<f8").reshape(3, 1, 2, 4) * 0.5 - 3.0)
c = (np.arange(10, dtype="<f8").reshape(5, 2, 1) - 4.5)
save("bc_a.npy", a)
save("bc_c.npy", c)
save("bc_add.npy", a + c)  # (3, 5, 2, 4)
save("bc_max.npy", np.maximum(a, c))
ia = np.arange(-6, 6, dtype="<i4").reshape(4, 1, 3)
ib = np.array([[-3], [2]], "<i4")  # (2, 1)
save("bc_ia.npy", ia)
save("bc_ib.npy", ib)
save("bc_imul.npy", ia * ib)
save("bc_idiv.npy", np.trunc(ia / ib).astype("<i4"))  # C division: truncates
save("bc_imod.npy", np.fmod(ia, ib).astype("<i4"))      # C %: sign of a
save("bc_iless.npy", ia < ib)
