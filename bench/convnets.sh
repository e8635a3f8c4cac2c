#!/usr/bin/env bash
# bench/convnets.sh — `make bench`: convolution networks as users have them
# (bench/convnets.py: resnet18, mobilenet_v3_small and a depthwise/SiLU
# network of our own, random seeded weights, exported by torch.onnx.export)
# at batch 1 and 8, tfvm against ONNX Runtime at 1 and 2 threads. Both are
# timed in-process and warm: tfvm around tfvm_run (bench/modelrun.c), ORT
# around session.run; ROUNDS rounds alternate the two so that both see the
# same machine, and each side's best median counts. Peak RSS is each
# process's (loading included). Outputs must match ORT's (rtol 1e-3, atol
# 1e-4). The issue-23 targets print as PASS/MISS; they do not change the
# exit status, nor does a peer that cannot be installed.
#
#   MODELS="resnet18 dwsilu" BATCHES=1 THREADS=1 bash bench/convnets.sh
set -u
MODELRUN=${MODELRUN:-build/bench/modelrun}
[ -x "$MODELRUN" ] || { echo "bench: $MODELRUN not built (run make bench)"; exit 1; }
# shellcheck source=bench/onnx_venv.sh
. bench/onnx_venv.sh
bench_venv "convolution networks" torch torchvision onnx onnxruntime numpy -- \
    torch torchvision onnx onnxruntime numpy || exit 0
PY=$BENCH_VENV/bin/python
DIR=${CONVNETS_DIR:-build/bench-models/convnets}
MODELS=${MODELS:-resnet18 mobilenet_v3_small dwsilu}
BATCHES=${BATCHES:-1 8}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for m in $MODELS; do
    [ -f "$DIR/${m}_b1.onnx" ] && [ -f "$DIR/${m}_b8.ort.npy" ] && continue
    echo "bench: exporting $m with torch.onnx.export into $DIR (once)"
    "$PY" bench/convnets.py build "$DIR" "$m" >/dev/null 2>"$TMP/err" ||
        { echo "bench: cannot export $m: $(grep -v Warning "$TMP/err" | tail -1)"; }
done

runs_for() { case $1 in 1) echo 20;; *) echo 6;; esac; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || (b != "" && b < a)) print b; else print a }'; }
ms() { awk -v s="$1" 'BEGIN { if (s == "") printf "-"; else printf "%.2f", s * 1e3 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b <= 0) printf "-"; else printf "%.2fx", a / b }'; }
mb() { awk -v k="$1" 'BEGIN { if (k == "") printf "-"; else printf "%.0f", k / 1024 }'; }

echo "convolution networks: tfvm $(build/bin/tfvm --version 2>/dev/null | sed 's/^tfvm //') vs $("$PY" -c 'import onnxruntime as o; print("onnxruntime", o.__version__)')" \
     "(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
echo "median ms per inference, in-process and warm, best of $ROUNDS alternating rounds; RSS: peak MB of each process"
printf '%-19s %5s %3s %9s %9s %9s %8s %8s %s\n' model batch thr "tfvm ms" "ORT ms" tfvm/ORT "tfvm MB" "ORT MB" out
declare -A RATIO
for m in $MODELS; do
    for b in $BATCHES; do
        f=$DIR/${m}_b$b
        [ -f "$f.onnx" ] || continue
        runs=$(runs_for "$b")
        for t in $THREADS; do
            tv='' ov='' trss='' orss='' out=same
            for r in $(seq "$ROUNDS"); do
                if line=$("$MODELRUN" "$f.onnx" "$t" "$runs" 2 -o "$TMP/out.npy" "$f.in.npy" 2>"$TMP/err"); then
                    read -r med _ rss <<<"$line"
                    tv=$(best "$tv" "$med") trss=$rss
                else
                    echo "bench: $m b$b: tfvm failed: $(tail -1 "$TMP/err")"
                    out=FAILED
                    break
                fi
                if line=$("$PY" bench/convnets.py ort "$f.onnx" "$f.in.npy" "$t" "$runs" 2 2>"$TMP/err"); then
                    read -r med _ rss <<<"$line"
                    ov=$(best "$ov" "$med") orss=$rss
                else
                    echo "bench: $m b$b: ORT failed: $(tail -1 "$TMP/err")"
                fi
            done
            if [ "$out" = same ] && ! why=$("$PY" bench/convnets.py same "$f.ort.npy" "$TMP/out.npy"); then
                out=DIFFERS
                echo "bench: $m b$b ($t threads): tfvm's output differs from ORT's: $why"
            fi
            [ "$out" = same ] && RATIO[$m.$b.$t]=$(ratio "$tv" "$ov" | tr -d x) && RATIO[$m.$b.$t.tv]=$tv
            printf '%-19s %5s %3s %9s %9s %9s %8s %8s %s\n' "$m" "$b" "$t" "$(ms "$tv")" "$(ms "$ov")" \
                "$(ratio "$tv" "$ov")" "$(mb "$trss")" "$(mb "$orss")" "$out"
        done
    done
done

echo "targets (issue 23; reported, not enforced):"
for m in $MODELS; do
    for b in $BATCHES; do
        for t in $THREADS; do
            r=${RATIO[$m.$b.$t]:-}
            if [ -z "$r" ] || [ "$r" = - ]; then
                echo "MISS  $m b$b $t thr: tfvm <= 1.0x ORT: no correct time"
            elif awk -v r="$r" 'BEGIN { exit !(r <= 1.0) }'; then
                echo "PASS  $m b$b $t thr: tfvm <= 1.0x ORT: ${r}x"
            else
                echo "MISS  $m b$b $t thr: tfvm <= 1.0x ORT: ${r}x"
            fi
        done
    done
done
one=${RATIO[resnet18.8.1.tv]:-} two=${RATIO[resnet18.8.2.tv]:-}
if [ -n "$one" ] && [ -n "$two" ]; then
    s=$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.2f", a / b }')
    awk -v s="$s" 'BEGIN { exit !(s >= 1.7) }' && echo "PASS  resnet18 b8: 2 threads >= 1.7x faster than 1: ${s}x" ||
        echo "MISS  resnet18 b8: 2 threads >= 1.7x faster than 1: ${s}x"
fi
exit 0
