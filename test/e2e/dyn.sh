#!/usr/bin/env bash
# test/e2e/dyn.sh TFVM TMP — models as exporters write them (issue 25).
# bert_dyn.onnx (test/e2e/dyn/gen.py): a BERT-like model exported with
# dynamic axes `batch` and `seq` and no onnx.shape_inference, compiled once to
# .tfvm and run at three (batch, seq) pairs against onnxruntime's outputs;
# its signature keeps the names of its symbolic dims.
set -u
TFVM=$1 TMP=$2
D=test/e2e/dyn
status=0
no() { echo "FAIL (dyn): $*"; status=1; }

"$TFVM" compile "$D/bert_dyn.onnx" -o "$TMP/bert.tfvm" 2>"$TMP/err" || no "compile bert_dyn.onnx: $(cat "$TMP/err")"
want='entry main(ids: i64[batch, seq]) -> (hidden: f32[batch, seq, 16])'
got=$("$TFVM" info "$TMP/bert.tfvm" | tail -1)
[ "$got" = "$want" ] || no "info bert.tfvm: want '$want', got '$got'"
got=$("$TFVM" run "$TMP/bert.tfvm" 2>&1)
[ "$got" = "tfvm: main(ids: i64[batch, seq]) takes 1 argument, got 0" ] || no "run bert.tfvm without ids: '$got'"
for pair in 1x5 2x8 3x13; do
    b=${pair%x*} s=${pair#*x}
    if ! "$TFVM" run "$TMP/bert.tfvm" "ids=@$D/bert_$pair.in.npy" -o "hidden=$TMP/bert_$pair.npy" 2>"$TMP/err"; then
        no "bert.tfvm at batch $b, seq $s: $(cat "$TMP/err")"
        continue
    fi
    got=$("$TFVM" run "$D/close.tfg" "@$TMP/bert_$pair.npy" "@$D/bert_$pair.ort.npy" 2>&1 | paste -sd'|')
    [ "$got" = "[$b, $s, 16]" ] || no "bert.tfvm at batch $b, seq $s against onnxruntime: '$got'"
done
# The model's own names: `tfvm profile`'s source column and `tfvm dot`'s
# first line of a node are the ONNX node (name and op type).
got=$("$TFVM" profile --runs 1 --warmup 0 --top 200 "$TMP/bert.tfvm" "ids=@$D/bert_2x8.in.npy" 2>&1 |
    awk '$1 == "main.softmax_0_0" { print $2, $NF, $(NF-1) }')
[ "$got" = "SOFTMAX (Softmax) /m/encoder/layer.0/attention/self/Softmax" ] || no "profile's source of softmax_0_0: '$got'"
want='    i67 [label="/m/encoder/layer.0/attention/self/Softmax (Softmax)\nsoftmax_0_0\nSOFTMAX axis=3 (matmul_0_0)", fillcolor=white, tooltip="softmax_0_0 = SOFTMAX axis=3 (matmul_0_0) from \"/m/encoder/layer.0/attention/self/Softmax\" \"Softmax\" var \"/m/encoder/layer.0/attention/self/Softmax_output_0\""];'
got=$("$TFVM" dot "$TMP/bert.tfvm" | grep -F 'softmax_0_0\nSOFTMAX')
[ "$got" = "$want" ] || no "dot's node of softmax_0_0: '$got'"
exit $status
