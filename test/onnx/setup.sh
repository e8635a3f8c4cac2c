#!/usr/bin/env bash
# test/onnx/setup.sh — the ONNX conformance data (docs/onnx.md): installs
# onnx from PyPI into build/onnx-venv and converts every backend node case
# (model.onnx + test_data_set_0/*.pb) into build/onnx-node/CASE/ with .npy
# inputs and expected outputs, which test/unit/test_onnx_conformance.c runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=build/onnx-venv
ONNX_VERSION=${ONNX_VERSION:-1.22.0}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import onnx, numpy" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "onnx==$ONNX_VERSION" numpy
fi
rm -rf build/onnx-node.tmp
"$VENV/bin/python" test/onnx/convert.py build/onnx-node.tmp
rm -rf build/onnx-node
mv build/onnx-node.tmp build/onnx-node
echo "setup.sh: $(ls build/onnx-node | grep -vc '^pytorch-') node cases and $(ls build/onnx-node | grep -c '^pytorch-') PyTorch model cases in build/onnx-node (onnx $ONNX_VERSION)"
