#!/usr/bin/env bash
# bench/models.sh — `make bench`: images per second of the example models
# examples/mlp.tfg (784-512-512-10, batch of 256) and examples/cnn.tfg (two
# conv blocks + dense, batch of 64) with 1 and 2 worker threads, next to NumPy
# running the same model with its BLAS on as many threads (bench/models.py),
# measured in this run. tfvm's time is the run's wall time from --stats (the
# computation only, .npy loading excluded), best of 3; both sides must
# predict the same classes (sum of the argmax over the batch).
set -u
TFVM=${TFVM:-build/bin/tfvm}
CC=${CC:-cc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFVM" ] || { echo "bench: $TFVM not built (run make)"; exit 1; }
$CC -O2 -o "$TMP/mkweights" examples/weights/mkweights.c && "$TMP/mkweights" "$TMP/w" ||
    { echo "bench: cannot build the weights (examples/weights/mkweights.c)"; exit 1; }
PY=
python3 -c 'import numpy' 2>/dev/null && PY=python3

# A tiny .tfg that turns a model's logits into the checksum NumPy prints.
cat >"$TMP/classes.tfg" <<'P'
fn main(logits: f32[?, ?]) -> i64 { reduce_sum(argmax(logits)) }
P

# name | program | .npy arguments | batch
W=$TMP/w
BENCHES=(
    "mlp|examples/mlp.tfg|$W/mlp_w1 $W/mlp_b1 $W/mlp_w2 $W/mlp_b2 $W/mlp_w3 $W/mlp_b3 $W/mlp_xb|256"
    "cnn|examples/cnn.tfg|$W/cnn_c1w $W/cnn_c1b $W/cnn_c2w $W/cnn_c2b $W/cnn_fw $W/cnn_fb $W/cnn_xb|64"
)
faster() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(b == "" || a < b) }'; }
rate() { awk -v n="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.0f", n / t; else printf "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else printf "-" }'; }

echo "example models: images/s (batch / wall time of the run, best of 3); NumPy: $([ -n "$PY" ] && python3 -c 'import numpy; print(numpy.__version__)' || echo "not found")"
printf '%-6s %6s %8s %11s %11s %11s %9s\n' model batch threads "tfvm s" "tfvm img/s" "NumPy img/s" tfvm/NumPy
status=0
for b in "${BENCHES[@]}"; do
    IFS='|' read -r name prog files batch <<<"$b"
    args=
    for f in $files; do args="$args @$f.npy"; done
    for threads in 1 2; do
        best=
        for _ in 1 2 3; do
            # shellcheck disable=SC2086
            if ! "$TFVM" run --stats --threads "$threads" "$prog" $args -o 0="$TMP/out.npy" 2>"$TMP/stats"; then
                echo "bench: $name failed: $(cat "$TMP/stats")"
                status=1
                continue 3
            fi
            wall=$(sed -n 's/.*wall \([0-9.]*\) s.*/\1/p' "$TMP/stats")
            faster "$wall" "$best" && best=$wall
        done
        sum=$("$TFVM" run "$TMP/classes.tfg" "@$TMP/out.npy")
        prate=- pratio=-
        if [ -n "$PY" ]; then
            read -r ptime psum <<<"$(OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads \
                $PY bench/models.py "$name" "$W")"
            prate=$(rate "$batch" "$ptime")
            pratio=$(ratio "$(rate "$batch" "$best")" "$prate")
            if [ "$psum" != "$sum" ]; then
                echo "bench: $name: tfvm and NumPy predict different classes (checksums $sum and $psum)"
                status=1
            fi
        fi
        printf '%-6s %6s %8s %11s %11s %11s %9s\n' "$name" "$batch" "$threads" "$best" "$(rate "$batch" "$best")" \
            "$prate" "$pratio"
    done
done
exit $status
