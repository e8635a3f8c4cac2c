#!/usr/bin/env bash
# test/gpu/check.sh — `make gpu-check`, second half: the CUDA backend on a
# real GPU, with only what test/gpu/carry.sh put in $BUILD/gpu-check (run it
# from the repository root; nothing is built or installed here). Without a
# GPU it prints one line and exits 0. With one (docs/devices.md):
#   1. tfvm devices; test_devices (every op the CUDA table marks, on every
#      dtype, against the CPU) and test_placement
#   2. every expectation of examples/ and test/gpu/ run with --device cuda
#      and auto, compared with the same run on the CPU (exit status, stdout,
#      stderr; numbers may differ by 1e-5 relative, counted apart); the example models (test/e2e/models.sh) on cuda and auto
#      against NumPy's outputs
#   3. timings: SGEMM N^3 through the VM (test/gpu/sgemm.tfg: K products in
#      a loop whose state stays on the GPU) against cuBLAS called directly
#      (bench/cublas_sgemm.cu), and the host<->device copies per iteration
#      of that loop; the model bench's resnet18 and BERT-like encoder at
#      batch 1 and 32 (bench/gpu_models.py, when python3 has torch) on the
#      GPU against PyTorch CUDA eager and against tfvm on the CPU, and the
#      copies one run makes (weights and input in, the result out)
#   4. $BUILD/gpu-check/out/summary.txt (or $GPU_CHECK_OUT): one line per
#      check, and the numbers; log.txt beside it has the details
# Exit status 1 when a check failed. GPU_CHECK_FAKE=LIB runs all of it on a
# stand-in backend (test/unit/fake_cuda.c) at small sizes: what `make test`
# does, so the script itself is tested where no GPU is.
set -u
BUILD=${BUILD:-build}
G=${GPU_CHECK_DIR:-$BUILD/gpu-check}
FAKE=${GPU_CHECK_FAKE:-}
TFVM=$G/bin/tfvm
[ -x "$TFVM" ] || { echo "gpu-check: $G/bin/tfvm is missing (run make gpu-check on the build machine)"; exit 1; }
export LD_LIBRARY_PATH=$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -z "$FAKE" ] || export TFVM_CUDA_LIB=$FAKE
unset TFVM_DEVICE

cuda=$("$TFVM" devices 2>&1 | grep '^cuda:')
case $cuda in
"cuda: ready"*) ;;
*) echo "gpu-check: no GPU here (${cuda:-tfvm devices printed no cuda line}): nothing checked"; exit 0 ;;
esac

if [ -n "$FAKE" ]; then
    SIZES=${GPU_CHECK_SIZES:-64 96} K=3 RUNS=2 WARM=1
else
    SIZES=${GPU_CHECK_SIZES:-4096 8192} K=20 RUNS=10 WARM=3
fi
OUT=${GPU_CHECK_OUT:-$G/out}
rm -rf "$OUT"
mkdir -p "$OUT"
LOG=$OUT/log.txt SUM=$OUT/summary.txt
failed=0
t_start=$(date +%s)
# result NAME STATUS DETAIL: one summary line (STATUS: PASS, FAIL, SKIP or a number)
result() {
    printf '%-38s %-5s %s\n' "$1" "$2" "$3" >>"$SUM"
    [ "$2" != FAIL ] || failed=1
}
log() { echo "== $*" >>"$LOG"; }
{
    echo "tfvm gpu-check, $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)${FAKE:+ (stand-in backend $FAKE)}"
    "$TFVM" devices
} >"$SUM"

# ---- 1. devices and the unit tests ---------------------------------------------------
for t in test_devices test_placement; do
    log "$t"
    timeout 300 "$G/test/$t" >"$OUT/$t.txt" 2>&1
    rc=$?
    cat "$OUT/$t.txt" >>"$LOG"
    last=$(grep -E '^[0-9]+%: Checks' "$OUT/$t.txt" | tail -1)
    if [ $rc -eq 0 ]; then result "$t" PASS "$last"; else result "$t" FAIL "exit $rc: ${last:-$(tail -1 "$OUT/$t.txt")}"; fi
done
grep -h '^SKIP' "$OUT/test_devices.txt" >>"$SUM"

# ---- 2. end to end: each device against the CPU ------------------------------------------
# runs FILE ARGS on device $1 into $OUT/e2e.$1: exit status, stdout, stderr
run_on() {
    local dev=$1 file=$2
    shift 2
    # shellcheck disable=SC2068
    "$TFVM" run --device "$dev" "$file" $@ </dev/null >"$OUT/e2e.$dev.out" 2>"$OUT/e2e.$dev.err"
    echo "rc $?" >>"$OUT/e2e.$dev.out"
}
# close A B: the same output but for numbers that differ in their last digits
# (|a - b| <= 1e-5 |a| + 1e-6): cuBLAS fuses and orders a product's sums its
# own way, so a float printed from one may differ from the CPU's in the last bits.
close() {
    awk 'NR == FNR { a[NR] = $0; n = NR; next }
         { if (FNR > n) exit 1; x = a[FNR]; y = $0
           if (x == y) next
           nx = split(x, s, /[][ ,()]+/); ny = split(y, t, /[][ ,()]+/)
           if (nx != ny) exit 1
           for (i = 1; i <= nx; i++) {
               if (s[i] == t[i]) continue
               num = "^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
               if (s[i] !~ num || t[i] !~ num) exit 1
               d = s[i] - t[i]; m = s[i] < 0 ? -s[i] : s[i]
               if ((d < 0 ? -d : d) > 1e-5 * m + 1e-6) exit 1
           } }
         END { if (FNR != n) exit 1 }' "$1" "$2"
}
declare -A same near differ
for dev in cuda auto; do same[$dev]=0 near[$dev]=0 differ[$dev]=0; done
# shellcheck disable=SC2094 # (run_on reads $src, it writes only under $OUT)
for src in examples/*.tfg examples/asm/*.tfasm test/gpu/*.tfg; do
    [ -e "$src" ] || continue
    while IFS= read -r line; do
        case $line in
        "// expect"*:*" -> "* | "; expect"*:*" -> "*) ;;
        *) continue ;;
        esac
        args=${line#*:}
        args=${args%% -> *}
        # shellcheck disable=SC2086
        run_on cpu "$src" $args
        for dev in cuda auto; do
            # shellcheck disable=SC2086
            run_on "$dev" "$src" $args
            if cmp -s "$OUT/e2e.cpu.out" "$OUT/e2e.$dev.out" && cmp -s "$OUT/e2e.cpu.err" "$OUT/e2e.$dev.err"; then
                same[$dev]=$((same[$dev] + 1))
            elif close "$OUT/e2e.cpu.out" "$OUT/e2e.$dev.out" && cmp -s "$OUT/e2e.cpu.err" "$OUT/e2e.$dev.err"; then
                near[$dev]=$((near[$dev] + 1))
                log "e2e $src '$args': --device $dev within 1e-5 of cpu"
                diff "$OUT/e2e.cpu.out" "$OUT/e2e.$dev.out" >>"$LOG"
            else
                differ[$dev]=$((differ[$dev] + 1))
                log "e2e $src '$args': --device $dev differs from cpu"
                for d in cpu "$dev"; do
                    echo "-- $d:" >>"$LOG"
                    head -c 600 "$OUT/e2e.$d.out" "$OUT/e2e.$d.err" >>"$LOG"
                done
            fi
        done
    done <"$src"
done
for dev in cuda auto; do
    n=$((same[$dev] + near[$dev] + differ[$dev]))
    if [ "${differ[$dev]}" -eq 0 ]; then
        extra=
        [ "${near[$dev]}" -eq 0 ] || extra=", ${near[$dev]} with numbers within 1e-5 (log.txt)"
        result "e2e --device $dev = cpu" PASS "${same[$dev]} of $n runs identical$extra"
    else
        result "e2e --device $dev = cpu" FAIL "${differ[$dev]} of $n runs differ (log.txt)"
    fi
done
for dev in cuda auto; do
    log "models --device $dev"
    mkdir -p "$OUT/models-$dev"
    if TFVM_DEVICE=$dev MKWEIGHTS=$G/bin/mkweights bash test/e2e/models.sh "$TFVM" "$OUT/models-$dev" >>"$LOG" 2>&1; then
        result "models --device $dev = NumPy" PASS "$(grep '^models:' "$LOG" | tail -1)"
    else
        result "models --device $dev = NumPy" FAIL "(log.txt)"
    fi
done

# ---- 3. timings ------------------------------------------------------------------------
# stat FIELD FILE: a number from tfvm --stats (wall, copies in, out)
stat() {
    case $1 in
    wall) sed -n 's/.*wall \([0-9.e+-]*\) s.*/\1/p' "$2" ;;
    in) sed -n 's/.*copies in \([0-9]*\).*/\1/p' "$2" ;;
    out) sed -n 's/.*copies in [0-9]* ([^)]*), out \([0-9]*\).*/\1/p' "$2" ;;
    esac
}
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
for n in $SIZES; do
    ok=1
    for k in 1 $((K + 1)); do
        log "sgemm $n x $k through the VM"
        "$TFVM" run --device cuda --stats test/gpu/sgemm.tfg "$n" "$k" >"$OUT/sgemm.$k" 2>&1 || ok=0
        cat "$OUT/sgemm.$k" >>"$LOG"
    done
    if [ $ok = 0 ] || [ -z "$(stat wall "$OUT/sgemm.1")" ] || [ -z "$(stat in "$OUT/sgemm.1")" ]; then
        result "sgemm $n^3 through the VM" FAIL "(log.txt)"
        continue
    fi
    vm_ms=$(calc "%.3f" "($(stat wall "$OUT/sgemm.$((K + 1))") - $(stat wall "$OUT/sgemm.1")) * 1000 / $K")
    copies=$(calc "%.2f" "($(stat in "$OUT/sgemm.$((K + 1))") + $(stat out "$OUT/sgemm.$((K + 1))") - $(stat in "$OUT/sgemm.1") - $(stat out "$OUT/sgemm.1")) / $K")
    gflops=$(calc "%.0f" "2 * $n * $n * $n / ($vm_ms * 1e-3) / 1e9")
    if [ -x "$G/bin/cublas_sgemm" ] && [ -z "$FAKE" ]; then
        log "cublas_sgemm $n $K"
        if ref=$("$G/bin/cublas_sgemm" "$n" "$K" 2>>"$LOG"); then
            ref_ms=${ref%% *}
            ratio=$(calc "%.2f" "$ref_ms / $vm_ms")
            st=PASS
            awk "BEGIN { exit !($ratio >= 0.9) }" || st=FAIL
            result "sgemm $n^3 VM vs cuBLAS (>=0.9x)" "$st" "VM $vm_ms ms ($gflops GFLOP/s), cuBLAS $ref_ms ms: ${ratio}x"
        else
            result "sgemm $n^3 VM vs cuBLAS (>=0.9x)" FAIL "cublas_sgemm failed (log.txt); VM $vm_ms ms"
        fi
    else
        result "sgemm $n^3 through the VM" SKIP "VM $vm_ms ms per product; no cuBLAS to compare${FAKE:+ (stand-in)}"
    fi
    st=PASS
    [ "$copies" = 0.00 ] || st=FAIL
    result "loop state copies per iteration ($n)" "$st" "$copies host<->device copies per iteration (want 0)"
done

# The models: exported here by the GPU machine's torch (or, on the stand-in,
# test/onnx's small ones with inputs made by tfvm itself).
MD=$OUT/models
mkdir -p "$MD"
torch=
if [ -z "$FAKE" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>>"$LOG"; then
    torch=1
    log "gpu_models.py build"
    python3 bench/gpu_models.py build "$MD" >"$OUT/build.txt" 2>>"$LOG"
    while read -r what name rest; do
        [ "$what" = skip ] && result "model $name" SKIP "cannot export: $rest"
    done <"$OUT/build.txt"
elif [ -n "$FAKE" ]; then
    cp test/onnx/models/mlp.onnx test/onnx/models/cnn.onnx "$MD/"
    printf 'fn main() -> f32[2, 4] { reshape(sin(cast<f32>(range(0i64, 8i64))), [2, 4]) }\n' >"$OUT/mlp.tfg"
    printf 'fn main() -> f32[1, 1, 4, 4] { reshape(cos(cast<f32>(range(0i64, 16i64))), [1, 1, 4, 4]) }\n' >"$OUT/cnn.tfg"
    for m in mlp cnn; do "$TFVM" run "$OUT/$m.tfg" -o 0="$MD/$m.in.npy" >>"$LOG" 2>&1; done
else
    result "models vs PyTorch" SKIP "python3 has no torch with CUDA"
fi
threads=$(nproc)
for model in "$MD"/*.onnx; do
    [ -e "$model" ] || continue
    stem=$(basename "$model" .onnx)
    in=$MD/$stem.in.npy
    r=$RUNS w=$WARM
    case $stem in *_b32) r=$((RUNS / 2)) w=1 ;; esac
    log "model $stem"
    cpu=$("$G/bin/modelrun" "$model" "$threads" "$r" "$w" -o "$MD/$stem.cpu.npy" "$in" 2>>"$LOG")
    gpu=$(TFVM_DEVICE=cuda "$G/bin/modelrun" "$model" "$threads" "$r" "$w" -c "$MD/$stem.cpu.npy" "$in" 2>>"$LOG")
    rc=$?
    echo "$cpu / $gpu" >>"$LOG"
    cpu_ms=$(calc "%.2f" "${cpu%% *} * 1000" 2>/dev/null)
    gpu_ms=$(calc "%.2f" "$(echo "$gpu" | tail -1 | cut -d' ' -f1) * 1000" 2>/dev/null)
    diff=$(echo "$gpu" | head -1)
    if [ -z "$cpu" ] || [ -z "$gpu_ms" ]; then
        result "model $stem" FAIL "did not run (log.txt)"
        continue
    fi
    line="cuda $gpu_ms ms, cpu ($threads threads) $cpu_ms ms"
    # what one run copies: the weights and the input in, the result out,
    # when every instruction runs on the GPU (more: some fell back to the CPU)
    if "$TFVM" run --device cuda --stats "$model" "@$in" --save-outputs "$OUT/$stem.out" >"$OUT/$stem.stats" 2>&1; then
        line="$line; one run copies in $(stat in "$OUT/$stem.stats"), out $(stat out "$OUT/$stem.stats")"
    fi
    cat "$OUT/$stem.stats" >>"$LOG"
    if [ -n "$torch" ]; then
        t=$(python3 bench/gpu_models.py torch "$MD" "$stem" "$r" "$w" 2>>"$LOG")
        [ -n "$t" ] && line="$line, PyTorch CUDA eager $(calc "%.2f" "${t%% *} * 1000") ms"
    fi
    if [ $rc -eq 0 ]; then result "model $stem cuda = cpu" PASS "$line; $diff"; else
        result "model $stem cuda = cpu" FAIL "$line; $diff"
    fi
done

echo "took $(($(date +%s) - t_start)) s; details in $LOG" >>"$SUM"
cat "$SUM"
exit $failed
