#!/usr/bin/env bash
# test/e2e/t5.sh TFVM TMP — a T5-like encoder (test/e2e/t5/gen.py) whose
# relative-position buckets cast log(0) = -inf to int64 and drop it with
# Where, against onnxruntime's output (issue 25): an imported Cast of an
# out-of-range float gives x86's value, as ORT does, instead of stopping.
set -u
TFVM=$1 TMP=$2
D=test/e2e/t5
if ! "$TFVM" run "$D/t5_enc.onnx" "ids=@$D/t5_2x7.in.npy" -o "hidden=$TMP/t5.npy" 2>"$TMP/t5.err"; then
    echo "FAIL (t5): t5_enc.onnx stopped: '$(cat "$TMP/t5.err")'"
    exit 1
fi
got=$("$TFVM" run test/e2e/dyn/close.tfg "@$TMP/t5.npy" "@$D/t5_2x7.ort.npy" 2>&1 | paste -sd'|')
[ "$got" = "[2, 7, 16]" ] && exit 0
echo "FAIL (t5): t5_enc.onnx against onnxruntime: '$got'"
exit 1
