#!/usr/bin/env bash
# test/e2e/tsan_cli.sh TFVM TMP — `make tsan`'s command-line part: the
# TSan-built tfvm runs the examples (recursion, loops, a runtime error, the
# example models) on 2 and 4 worker threads. Every output must be exact and
# any ThreadSanitizer report fails the run (TSan exits 66 at the first one).
set -u
TFVM=$1 TMP=$2
CC=${CC:-cc}
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
mkdir -p "$TMP"
status=0 n=0
no() { echo "FAIL (tsan cli): $*"; status=1; }

# program | arguments | stdout (lines joined by ' | '), or "error: MESSAGE" for stderr
RUNS=(
    "examples/fib.tfg|20|10946"
    "examples/takeuchi.tfg|18 12 6|7"
    "examples/ackermann.tfg|2 3|9"
    "examples/primes.tfg|2000|10349"
    "examples/sum_loop.tfg|20000|200010000"
    "examples/nested_loops.tfg|30 40|339300"
    "examples/loop_recursion.tfg|20|tet: 1540 | total: 8855"
    "examples/collatz.tfg|27|111"
    "examples/gcd.tfg|1071 462|g: 21 | agree: true"
    "examples/asm/even_odd.tfasm|1001|false"
    "bench/fac_loop.tfg|12 300|1966559232"
    "test/e2e/runtime_errors.tfasm|2|error: q (DIV) at [f@1, f@2, f@2]: integer division by zero"
    "test/e2e/feed_loop.tfg|4 --feed x=5,6,7,8|fetch sum: 5 | fetch sum: 17 | fetch sum: 38 | fetch sum: 70 | 70"
    "test/e2e/fetch_fib.tfg|4|fetch n: 4 | fetch n: 3 | fetch n: 2 | fetch n: 1 | fetch n: 0 | fetch n: 1 | fetch n: 2 | fetch n: 1 | fetch n: 0 | 3"
)

for threads in 2 4; do
    for r in "${RUNS[@]}"; do
        IFS='|' read -r prog args want <<<"$r"
        want=${want# }
        # shellcheck disable=SC2086
        out=$("$TFVM" run --threads "$threads" "$prog" $args 2>"$TMP/err")
        rc=$?
        if [ $rc = 66 ] || grep -q "ThreadSanitizer" "$TMP/err"; then
            no "$prog $args (--threads $threads): ThreadSanitizer report:"
            cat "$TMP/err"
            continue
        fi
        case $want in
        "error: "*)
            got="error: $(sed -n '1s/^tfvm: //p' "$TMP/err")"
            [ $rc != 0 ] || got="exit 0: $out"
            ;;
        *)
            got=$(printf '%s\n' "$out" | paste -sd'|' | sed 's/|/ | /g')
            [ $rc = 0 ] || got="exit $rc: $(cat "$TMP/err")"
            ;;
        esac
        if [ "$got" = "$want" ]; then n=$((n + 1)); else
            no "$prog $args (--threads $threads): want '$want', got '$got'"
        fi
    done
done

# Many runs in a row on one VM's persistent workers: `tfvm profile` runs the
# program 2 + 20 times, then 20 more timing every firing. The counts of a run
# are the same on any number of threads.
PROFILES=(
    "examples/fib.tfg|15|one run: 9866 firings, 14797 tokens, 986 matches, 1974 contexts"
    "examples/nested_loops.tfg|10 20|one run: 2252 firings, 3343 tokens, 1094 matches, 222 contexts"
)
for threads in 2 4; do
    for r in "${PROFILES[@]}"; do
        IFS='|' read -r prog args want <<<"$r"
        # shellcheck disable=SC2086
        "$TFVM" profile --threads "$threads" --runs 20 --warmup 2 "$prog" $args >"$TMP/prof" 2>"$TMP/err"
        rc=$?
        got=$(sed -n 's/^\(one run: .* contexts\) (peak.*/\1/p' "$TMP/prof")
        if [ $rc != 0 ]; then
            no "tfvm profile --threads $threads $prog $args: exit $rc: $(cat "$TMP/err")"
        elif [ "$got" != "$want" ]; then
            no "tfvm profile --threads $threads $prog $args: want '$want', got '$got'"
        else
            n=$((n + 1))
        fi
    done
done

# The example models on their sample inputs (as test/e2e/models.sh), checked
# against NumPy's outputs through test/e2e/models/check.tfg.
W=$TMP/weights
if ! $CC -O2 -o "$TMP/mkweights" examples/weights/mkweights.c 2>"$TMP/mkw.err" || ! "$TMP/mkweights" "$W" >/dev/null; then
    no "examples/weights/mkweights.c: $(cat "$TMP/mkw.err")"
    exit 1
fi
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
while IFS=$'\t' read -r model want; do
    [ -n "$model" ] || continue
    for threads in 2 4; do
        # shellcheck disable=SC2046
        if ! "$TFVM" run --threads "$threads" "examples/$model.tfg" $(model_args "$model") \
            -o 0="$TMP/$model.npy" 2>"$TMP/err"; then
            no "$model (--threads $threads): $(cat "$TMP/err")"
            continue
        fi
        got=$("$TFVM" run --threads "$threads" test/e2e/models/check.tfg "@$TMP/$model.npy" \
            "@test/e2e/models/${model}_ref.npy" 2>&1 | paste -sd'|' | sed 's/|/ | /g')
        if [ "$got" = "$want" ]; then n=$((n + 1)); else
            no "$model (--threads $threads): want '$want', got '$got'"
        fi
    done
done <test/e2e/models/EXPECTED

# The CNN on its benchmark batch (64 images): its pooling (and whatever else
# devices/cpu splits with dev_par_for) runs as parallel loops on the run's
# idle workers; 2 and 4 threads must give the one-thread run's bytes.
xb="$(model_args cnn | sed 's/cnn_x\.npy/cnn_xb.npy/')"
for threads in 1 2 4; do
    # shellcheck disable=SC2086
    "$TFVM" run --threads "$threads" examples/cnn.tfg $xb -o 0="$TMP/cnn_xb_$threads.npy" 2>"$TMP/err" ||
        no "cnn on 64 images (--threads $threads): $(cat "$TMP/err")"
done
for threads in 2 4; do
    if cmp -s "$TMP/cnn_xb_1.npy" "$TMP/cnn_xb_$threads.npy"; then n=$((n + 1)); else
        no "cnn on 64 images: --threads $threads differs from --threads 1"
    fi
done

if [ $status = 0 ]; then
    echo "tsan cli: $n runs on 2 and 4 threads right and TSan-clean"
else
    echo "tsan cli: $n runs right and TSan-clean, the others FAILED (above)"
fi
exit $status
