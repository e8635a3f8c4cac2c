#!/usr/bin/env bash
# test/e2e/models.sh TFVM TMP — the example models end to end. Builds the
# weights (examples/weights/mkweights.c), runs examples/{mlp,cnn,rnn,treernn}.tfg
# on their sample inputs with 1 and 2 threads, and compares each output with
# NumPy's (test/e2e/models/NAME_ref.npy, made by examples/weights/reference.py)
# through test/e2e/models/check.tfg, whose printed line (all close, and the
# output x100 rounded) must be the model's line in test/e2e/models/EXPECTED.
# TFVM_DEVICE (cpu, cuda, auto) places the models' runs (make gpu-check).
set -u
TFVM=$1 TMP=$2
CC=${CC:-cc}
status=0
no() { echo "FAIL (models): $*"; status=1; }

W=$TMP/weights
# MKWEIGHTS: a mkweights built beforehand (make gpu-check's machine has no compiler to rely on)
MKWEIGHTS=${MKWEIGHTS:-}
if [ -n "$MKWEIGHTS" ]; then
    cp "$MKWEIGHTS" "$TMP/mkweights" 2>"$TMP/mkw.err"
else
    $CC -O2 -o "$TMP/mkweights" examples/weights/mkweights.c 2>"$TMP/mkw.err"
fi
if [ ! -x "$TMP/mkweights" ] || ! "$TMP/mkweights" "$W"; then
    no "examples/weights/mkweights.c: $(cat "$TMP/mkw.err")"
    exit 1
fi

# the .npy arguments of each model, in parameter order
model_args() {
    local files
    case $1 in
    mlp) files="mlp_w1 mlp_b1 mlp_w2 mlp_b2 mlp_w3 mlp_b3 mlp_x" ;;
    cnn) files="cnn_c1w cnn_c1b cnn_c2w cnn_c2b cnn_fw cnn_fb cnn_x" ;;
    rnn) files="rnn_wx rnn_wh rnn_b rnn_wo rnn_bo rnn_xs" ;;
    treernn) files="tree_emb tree_w tree_b tree_wo tree_bo tree_left tree_right tree_word" ;;
    esac
    for f in $files; do printf '@%s/%s.npy ' "$W" "$f"; done
}

n=0
while IFS=$'\t' read -r model want; do
    [ -n "$model" ] || continue
    for threads in 1 2; do
        # shellcheck disable=SC2046
        if ! "$TFVM" run --threads "$threads" "examples/$model.tfg" $(model_args "$model") \
            -o 0="$TMP/$model.npy" 2>"$TMP/err"; then
            no "$model (--threads $threads): $(cat "$TMP/err")"
            continue
        fi
        got=$("$TFVM" run test/e2e/models/check.tfg "@$TMP/$model.npy" "@test/e2e/models/${model}_ref.npy" 2>&1 |
            paste -sd'|' | sed 's/|/ | /g')
        if [ "$got" = "$want" ]; then n=$((n + 1)); else
            no "$model (--threads $threads): want '$want', got '$got'"
        fi
    done
done <test/e2e/models/EXPECTED
# The same MLP with its weights embedded by load() (examples/weights/mlp_embedded.tfg,
# next to the weights it reads): one .tfvm file, one argument.
cp examples/weights/mlp_embedded.tfg "$W/"
want=$(sed -n 's/^mlp\t//p' test/e2e/models/EXPECTED)
if "$TFVM" compile "$W/mlp_embedded.tfg" -o "$TMP/mlp_embedded.tfvm" 2>"$TMP/err" &&
    "$TFVM" run "$TMP/mlp_embedded.tfvm" "@$W/mlp_x.npy" -o 0="$TMP/mlp_embedded.npy" 2>"$TMP/err"; then
    got=$("$TFVM" run test/e2e/models/check.tfg "@$TMP/mlp_embedded.npy" "@test/e2e/models/mlp_ref.npy" 2>&1 |
        paste -sd'|' | sed 's/|/ | /g')
    if [ "$got" = "$want" ]; then n=$((n + 1)); else no "mlp_embedded: want '$want', got '$got'"; fi
else
    no "mlp_embedded: $(cat "$TMP/err")"
fi
echo "models: $n runs match NumPy"
exit $status
