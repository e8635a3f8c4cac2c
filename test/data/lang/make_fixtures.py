#!/usr/bin/env python3
"""test/data/lang/make_fixtures.py: the arrays test_lang's load() cases read.
Written by hand in the .npy 1.0 format (no NumPy needed); w.npz holds two
stored members (as np.savez writes them), wz.npz one deflated member (as
np.savez_compressed does), which load() refuses. Run from this directory."""
import struct
import zipfile


def npy(descr, shape, data):
    shape_txt = "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join(str(d) for d in shape) + ")"
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_txt)
    total = 10 + len(head) + 1
    head += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + data


w = npy("<f4", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6))
b = npy("<i8", [3], struct.pack("<3q", 10, 20, 30))
open("w.npy", "wb").write(w)
with zipfile.ZipFile("w.npz", "w", zipfile.ZIP_STORED) as z:
    z.writestr("w.npy", w)
    z.writestr("b.npy", b)
with zipfile.ZipFile("wz.npz", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("w.npy", w)
