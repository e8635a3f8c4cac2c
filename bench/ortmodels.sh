#!/usr/bin/env bash
# bench/ortmodels.sh — `make bench`: models as users have them, exported by
# torch.onnx.export with random seeded weights, tfvm against ONNX Runtime at
# 1 and 2 threads. SET=conv: bench/convnets.py's resnet18,
# mobilenet_v3_small and a depthwise/SiLU network of our own at batch 1 and
# 8 (issue 23); SET=seq: bench/seqnets.py's BERT-like encoder,
# nn.TransformerEncoder, LSTM, GRU and a scripted greedy decoder at sequence lengths 8, 32, 128
# (issue 24), then the decoder on the default threads against --threads 1
# (issue 30: a small graph must not be slower on the default). Both are
# timed in-process and warm: tfvm around tfvm_run (bench/modelrun.c), ORT
# around session.run; ROUNDS rounds alternate the two so that both see the
# same machine, and each side's best median counts. Peak RSS is each
# process's (loading included). Outputs must match ORT's (rtol 1e-3, atol
# 1e-4). The issue-23 targets print as PASS/MISS; they do not change the
# exit status, nor does a peer that cannot be installed.
#
#   SET=conv MODELS="resnet18 dwsilu" VARIANTS=b1 THREADS=1 bash bench/ortmodels.sh
set -u
MODELRUN=${MODELRUN:-build/bench/modelrun}
[ -x "$MODELRUN" ] || { echo "bench: $MODELRUN not built (run make bench)"; exit 1; }
# shellcheck source=bench/onnx_venv.sh
. bench/onnx_venv.sh
SET=${SET:-conv}
case $SET in
conv) GEN=bench/convnets.py TITLE="convolution networks" DEF_MODELS="resnet18 mobilenet_v3_small dwsilu stage4conv"
      DEF_VARIANTS="b1 b8" MODS="torch torchvision" PKGS="torch torchvision" ;;
seq)  GEN=bench/seqnets.py TITLE="transformers and recurrent layers" DEF_MODELS="bert transformer lstm gru decoder"
      DEF_VARIANTS="s8 s32 s128" MODS="torch transformers" PKGS="torch transformers" ;;
*) echo "bench: SET must be conv or seq"; exit 1 ;;
esac
# shellcheck disable=SC2086
bench_venv "$TITLE" $MODS onnx onnxruntime numpy -- $PKGS onnx onnxruntime numpy || exit 0
PY=$BENCH_VENV/bin/python
DIR=build/bench-models/$SET
MODELS=${MODELS:-$DEF_MODELS}
VARIANTS=${VARIANTS:-$DEF_VARIANTS}
THREADS=${THREADS:-1 2}
ROUNDS=${ROUNDS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for m in $MODELS; do
    last=${DEF_VARIANTS##* }
    [ -f "$DIR/${m}_$last.ort.npy" ] && continue
    echo "bench: exporting $m with torch.onnx.export into $DIR (once)"
    "$PY" "$GEN" build "$DIR" "$m" >/dev/null 2>"$TMP/err" ||
        { echo "bench: cannot export $m: $(grep -v Warning "$TMP/err" | tail -1)"; }
done

runs_for() { case $1 in b8 | s128) echo 6;; *) echo 20;; esac; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || (b != "" && b < a)) print b; else print a }'; }
ms() { awk -v s="$1" 'BEGIN { if (s == "") printf "-"; else printf "%.2f", s * 1e3 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b <= 0) printf "-"; else printf "%.2fx", a / b }'; }
mb() { awk -v k="$1" 'BEGIN { if (k == "") printf "-"; else printf "%.0f", k / 1024 }'; }

echo "$TITLE: tfvm $(build/bin/tfvm --version 2>/dev/null | sed 's/^tfvm //') vs $("$PY" -c 'import onnxruntime as o; print("onnxruntime", o.__version__)')" \
     "(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
echo "median ms per inference, in-process and warm, best of $ROUNDS alternating rounds; RSS: peak MB of each process"
printf '%-19s %5s %3s %9s %9s %9s %8s %8s %s\n' model shape thr "tfvm ms" "ORT ms" tfvm/ORT "tfvm MB" "ORT MB" out
declare -A RATIO
for m in $MODELS; do
    for b in $VARIANTS; do
        f=$DIR/${m}_$b
        [ -f "$f.onnx" ] || continue
        runs=$(runs_for "$b")
        for t in $THREADS; do
            tv='' ov='' trss='' orss='' out=same
            for r in $(seq "$ROUNDS"); do
                if line=$("$MODELRUN" "$f.onnx" "$t" "$runs" 2 -o "$TMP/out.npy" "$f.in.npy" 2>"$TMP/err"); then
                    read -r med _ rss <<<"$line"
                    tv=$(best "$tv" "$med") trss=$rss
                else
                    echo "bench: $m $b: tfvm failed: $(tail -1 "$TMP/err")"
                    out=FAILED
                    break
                fi
                if line=$("$PY" "$GEN" ort "$f.onnx" "$f.in.npy" "$t" "$runs" 2 2>"$TMP/err"); then
                    read -r med _ rss <<<"$line"
                    ov=$(best "$ov" "$med") orss=$rss
                else
                    echo "bench: $m $b: ORT failed: $(tail -1 "$TMP/err")"
                fi
            done
            if [ "$out" = same ] && ! why=$("$PY" "$GEN" same "$f.ort.npy" "$TMP/out.npy"); then
                out=DIFFERS
                echo "bench: $m $b ($t threads): tfvm's output differs from ORT's: $why"
            fi
            [ "$out" = same ] && RATIO[$m.$b.$t]=$(ratio "$tv" "$ov" | tr -d x) && RATIO[$m.$b.$t.tv]=$tv
            printf '%-19s %5s %3s %9s %9s %9s %8s %8s %s\n' "$m" "$b" "$t" "$(ms "$tv")" "$(ms "$ov")" \
                "$(ratio "$tv" "$ov")" "$(mb "$trss")" "$(mb "$orss")" "$out"
        done
    done
done

# target: the issue's bound on tfvm/ORT for a model
limit() { case $1 in lstm | gru) echo 0.8;; decoder) echo 0.5;; *) echo 1.0;; esac; }
echo "targets (issue $([ "$SET" = conv ] && echo 23 || echo 24); reported, not enforced):"
for m in $MODELS; do
    lim=$(limit "$m")
    for b in $VARIANTS; do
        for t in $THREADS; do
            r=${RATIO[$m.$b.$t]:-}
            if [ -z "$r" ] || [ "$r" = - ]; then
                echo "MISS  $m $b $t thr: tfvm <= ${lim}x ORT: no correct time"
            elif awk -v r="$r" -v l="$lim" 'BEGIN { exit !(r <= l) }'; then
                echo "PASS  $m $b $t thr: tfvm <= ${lim}x ORT: ${r}x"
            else
                echo "MISS  $m $b $t thr: tfvm <= ${lim}x ORT: ${r}x"
            fi
        done
    done
done
# resnet18's last-stage 3x3 convolution alone: 2 * B*512*49*512*9 flops
for b in $VARIANTS; do
    tv=${RATIO[stage4conv.$b.1.tv]:-}
    [ -n "$tv" ] || continue
    gf=$(awk -v t="$tv" -v b="${b#b}" 'BEGIN { printf "%.0f", 2 * b * 512 * 49 * 512 * 9 / t / 1e9 }')
    if [ "$gf" -ge 100 ]; then
        echo "PASS  resnet18 last-stage 3x3 convolution, $b, 1 thr: >= 100 GFLOP/s: $gf"
    else
        echo "MISS  resnet18 last-stage 3x3 convolution, $b, 1 thr: >= 100 GFLOP/s: $gf"
    fi
done
# The decoder on the default threads (one per core) against --threads 1,
# alternating, many runs each: a run of a few microseconds that no second
# worker can help must cost the same on both (issue 30). 5% is this shared
# machine's noise between two alternating medians.
defrow() {
    local f=$1 b=$2 runs=$3 one='' def='' line med t
    for _ in $(seq "$((ROUNDS + 2))"); do
        for t in 1 0; do
            line=$("$MODELRUN" "$f.onnx" "$t" "$runs" 20 "$f.in.npy" 2>"$TMP/err") || {
                echo "bench: decoder $b on $t threads: $(tail -1 "$TMP/err")"
                return
            }
            read -r med _ <<<"$line"
            if [ "$t" = 1 ]; then one=$(best "$one" "$med"); else def=$(best "$def" "$med"); fi
        done
    done
    local r us
    r=$(awk -v a="$def" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
    us=$(awk -v a="$def" -v b="$one" 'BEGIN { printf "%.0f vs %.0f us", a * 1e6, b * 1e6 }')
    if awk -v r="$r" 'BEGIN { exit !(r <= 1.05) }'; then
        echo "PASS  decoder $b: default threads no slower than --threads 1 (<= 1.05x): ${r}x ($us)"
    else
        echo "MISS  decoder $b: default threads no slower than --threads 1 (<= 1.05x): ${r}x ($us)"
    fi
}
case " $MODELS " in
*" decoder "*)
    echo "default threads ($(nproc) CPUs; one worker per core) vs --threads 1 (issue 30), medians of 600 (s128) to 2000 (s8) runs, best of $((ROUNDS + 2)) alternating rounds:"
    for b in $VARIANTS; do
        [ -f "$DIR/decoder_$b.onnx" ] && defrow "$DIR/decoder_$b" "$b" "$(($(runs_for "$b") * 100))"
    done ;;
esac
one=${RATIO[resnet18.b8.1.tv]:-} two=${RATIO[resnet18.b8.2.tv]:-}
if [ -n "$one" ] && [ -n "$two" ]; then
    s=$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.2f", a / b }')
    if awk -v s="$s" 'BEGIN { exit !(s >= 1.7) }'; then
        echo "PASS  resnet18 b8: 2 threads >= 1.7x faster than 1: ${s}x"
    else
        echo "MISS  resnet18 b8: 2 threads >= 1.7x faster than 1: ${s}x"
    fi
fi
exit 0
