#!/usr/bin/env bash
# bench/python.sh — `make bench`: the Python package (docs/python.md).
# 1. Per-call overhead of session.run on a 1-element Identity model, tfvm's
#    InferenceSession against ONNX Runtime's, alternating in this run, on 1
#    thread and on each one's default threads. Target (issue 26): tfvm <= ORT.
# 2. Models from Python: the median of InferenceSession.run against the C
#    harness's (`tfvm profile`, as bench/onnx.sh times it) on the same files at
#    1 and 2 threads. Target: within 5%.
# PASS/MISS lines do not change the exit status; without the venvs (PyPI) the
# rows say they skipped.
set -u
TFVM=${TFVM:-build/bin/tfvm}
BUILD=${BUILD:-build}
[ -x "$TFVM" ] || { echo "bench: $TFVM not built (run make)"; exit 1; }
bash python/tests/run.sh "${PYTHON3:-python3}" "$BUILD/py-venv" "$BUILD" install >/dev/null ||
    { echo "bench: Python rows skipped: the tfvm package could not be built into $BUILD/py-venv (make pytest says why)"; exit 0; }
PY=$BUILD/py-venv/bin/python
pass() { awk -v r="$1" -v l="$2" 'BEGIN { exit !(r != "-" && r <= l) }' && echo PASS || echo MISS; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == "-" || b <= 0) printf "-"; else printf "%.3f", a / b }'; }

echo "Python: tfvm $("$PY" -c 'import tfvm; print(tfvm.__version__)') package vs $("$PY" -c 'import onnxruntime as o; print("onnxruntime", o.__version__)' 2>/dev/null || echo "no onnxruntime")"
echo "per-call overhead, session.run on a 1-element Identity (python/tests/models/identity.onnx), best of 7 x 20000 calls:"
printf '  %-24s %9s %9s %9s\n' threads "tfvm us" "ORT us" tfvm/ORT
for t in 1 0; do
    read -r tv ov < <("$PY" bench/python_bench.py overhead python/tests/models/identity.onnx "$t")
    r=$(ratio "$tv" "$ov")
    printf '  %-24s %9s %9s %9s  %s\n' "$([ "$t" = 0 ] && echo "default (one per core)" || echo "$t")" "$tv" "$ov" "$r" \
        "$(pass "$r" 1.0) tfvm <= ORT"
done

# the models of bench/onnx.sh, made by the bench venv (it has onnx)
# shellcheck source=bench/onnx_venv.sh
. bench/onnx_venv.sh
bench_venv "Python model rows" onnx numpy -- onnx numpy || exit 0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$BENCH_VENV/bin/python" bench/onnx_models.py build "$TMP" >/dev/null || { echo "bench: cannot build the ONNX models"; exit 1; }
echo "models from Python: median seconds per run after warm-up, InferenceSession.run vs the C harness (tfvm profile):"
printf '  %-8s %3s %10s %10s %9s\n' model thr "Python ms" "C ms" Python/C
for m in "mlp|50|5" "cnn|30|5"; do
    IFS='|' read -r name runs warmup <<<"$m"
    read -r -a args <"$TMP/$name.args"
    for t in 1 2; do
        best_py='' best_c=''
        for round in 1 2 3; do   # alternating, best of 3 medians: the machine is shared
            py=$(OPENBLAS_NUM_THREADS=$t "$PY" bench/python_bench.py model "$TMP" "$name" "$t" "$runs" "$warmup")
            c=$(OPENBLAS_NUM_THREADS=$t "$TFVM" profile --runs "$runs" --warmup "$warmup" --threads "$t" --top 1 \
                "$TMP/$name.onnx" "${args[@]}" 2>/dev/null | sed -n 's/^ *real \([0-9.]*\) s median.*/\1/p')
            best_py=$(awk -v a="$best_py" -v b="$py" 'BEGIN { print (a == "" || b < a) ? b : a }')
            best_c=$(awk -v a="$best_c" -v b="$c" 'BEGIN { print (a == "" || b < a) ? b : a }')
            : "$round"
        done
        r=$(ratio "$best_py" "$best_c")
        printf '  %-8s %3s %10.3f %10.3f %9s  %s\n' "$name" "$t" "$(awk -v s="$best_py" 'BEGIN { print s * 1e3 }')" \
            "$(awk -v s="$best_c" 'BEGIN { print s * 1e3 }')" "$r" "$(pass "$r" 1.05) within 5%"
    done
done
exit 0
