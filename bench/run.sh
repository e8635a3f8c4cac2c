#!/usr/bin/env bash
# bench/run.sh — `make bench`: the recursion benchmarks of the 2018 thesis
# (fib, ackermann, takeuchi, primes) and factorial, compiled from .tfg and run
# by tfvm, next to a C reference (bench/ref.c, -O2) and CPython
# (bench/thesis.py, when python3 is present), all measured in this run.
# Times are of the computation only (tfvm: the run's wall time from --stats,
# best of 3, on the deterministic single-thread scheduler and, in the last
# column, on the default worker threads; C: best of repeated runs; CPython:
# one run), and every implementation must give the same result.
set -u
TFVM=${TFVM:-build/bin/tfvm}
CC=${CC:-cc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFVM" ] || { echo "bench: $TFVM not built (run make)"; exit 1; }
$CC -O2 -o "$TMP/ref" bench/ref.c || { echo "bench: cannot build bench/ref.c"; exit 1; }
PY=
if command -v python3 >/dev/null 2>&1; then PY=python3; fi

# name | tfvm program | arguments | reference name
BENCHES=(
    "fib(27)|examples/fib.tfg|27|fib"
    "ackermann(3,7)|examples/ackermann.tfg|3 7|ack"
    "takeuchi(24,16,8)|examples/takeuchi.tfg|24 16 8|tak"
    "primes(7500)|examples/primes.tfg|7500|primes"
    "factorial(12)x20000|bench/fac_loop.tfg|12 20000|fac"
)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else printf "-" }'; }

pyver="not found"
[ -n "$PY" ] && pyver=$($PY -c 'import platform; print(platform.python_version())')
echo "tfvm $("$TFVM" --version | sed 's/^tfvm //'); C: $CC -O2; CPython: $pyver"
echo "times in seconds (computation only); ratios are tfvm time / reference time; calls/s and firings/call are tfvm's"
NPROC=$(nproc 2>/dev/null || echo 1)
printf '%-20s %11s %9s %9s %9s %9s %9s %9s %11s %9s %10s\n' benchmark result calls tfvm C CPython tfvm/C tfvm/Py \
    "calls/s" fire/call "tfvm ${NPROC}cpu"
status=0
for b in "${BENCHES[@]}"; do
    IFS='|' read -r name prog args ref <<<"$b"
    best=
    par=
    fired=
    for mode in --deterministic --deterministic --deterministic "" ""; do
        # shellcheck disable=SC2086
        out=$("$TFVM" run --stats $mode "$prog" $args 2>"$TMP/stats") || { echo "bench: $name failed: $(cat "$TMP/stats")"; status=1; continue 2; }
        wall=$(sed -n 's/.*wall \([0-9.]*\) s.*/\1/p' "$TMP/stats")
        if [ -n "$mode" ]; then
            fired=$(sed -n 's/.*fired \([0-9]*\),.*/\1/p' "$TMP/stats")
            if [ -z "$best" ] || awk -v a="$wall" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$wall; fi
        elif [ -z "$par" ] || awk -v a="$wall" -v b="$par" 'BEGIN { exit !(a < b) }'; then
            par=$wall
        fi
    done
    # shellcheck disable=SC2086
    read -r cres calls ctime <<<"$("$TMP/ref" $ref $args)"
    pres=- ptime=0
    if [ -n "$PY" ]; then
        # shellcheck disable=SC2086
        read -r pres _ ptime <<<"$($PY bench/thesis.py $ref $args)"
    fi
    if [ "$out" != "$cres" ] || { [ -n "$PY" ] && [ "$pres" != "$cres" ]; }; then
        echo "bench: $name: results differ: tfvm $out, C $cres, CPython $pres"
        status=1
    fi
    rate=$(awk -v c="$calls" -v t="$best" 'BEGIN { printf "%.2fM", c / t / 1e6 }')
    fpc=$(awk -v f="$fired" -v c="$calls" 'BEGIN { printf "%.1f", f / c }')
    printf '%-20s %11s %9s %9s %9s %9s %9s %9s %11s %9s %10s\n' "$name" "$out" "$calls" "$best" "$ctime" \
        "$([ -n "$PY" ] && echo "$ptime" || echo -)" "$(ratio "$best" "$ctime")" \
        "$([ -n "$PY" ] && ratio "$best" "$ptime" || echo -)" "$rate" "$fpc" "$par"
done
exit $status
