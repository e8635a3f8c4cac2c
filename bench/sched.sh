#!/usr/bin/env bash
# bench/sched.sh — the VM's floors, measured in this run: ns per firing on a
# long chain of trivial instructions, and ns per iteration of a while loop
# with a one-op body (--threads 1, the deterministic scheduler). Times are the
# run's wall time from --stats, best of 3. Then issue 13's per-run targets,
# PASS/MISS: the median time of one in-process run of a trivial program
# (`tfvm profile`, default threads and 1 thread), and ns per iteration of
# bench/loop100k.tfg (acc += (i*i) % 7, 100k iterations); last, the CPU
# time per level of an endless recursion stopped by "recursion too deep" at
# two depths (issue 30: linear in the depth). (The 2-thread speed-ups and the
# CPython ratios are in bench/run.sh's table.)
set -u
TFVM=${TFVM:-build/bin/tfvm}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFVM" ] || { echo "bench: $TFVM not built (run make)"; exit 1; }

# best_of PROG THREADS ARGS... -> "wall fired" (THREADS 0: the default; best of $REPS, default 3)
best_of() {
    local prog=$1 threads=$2 best='' fired=''
    local topt=(--threads "$threads")
    [ "$threads" = 0 ] && topt=()
    shift 2
    for _ in $(seq "${REPS:-3}"); do
        "$TFVM" run --stats "${topt[@]}" "$prog" "$@" >/dev/null 2>"$TMP/stats" || { echo "fail"; return; }
        local w f
        w=$(sed -n 's/.*wall \([0-9.]*\) s.*/\1/p' "$TMP/stats")
        f=$(sed -n 's/.*fired \([0-9]*\),.*/\1/p' "$TMP/stats")
        if [ -z "$best" ] || awk -v a="$w" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$w; fi
        fired=$f
    done
    echo "$best $fired"
}

# A loop whose body sends the counter through a chain of 200 IDENTITYs.
{
    echo "entry main(n: i64) -> (r: i64) {"
    echo "    n  = ARG 0"
    echo "    z  = CONST i64 0"
    echo "    ei = ENTER chain (z)"
    echo "    en = ENTER chain const (n)"
    echo "         RESULT 0 (chain.out)"
    echo "}"
    echo "loop chain in main {"
    echo "    i  = MERGE (ei, ni)"
    echo "    p  = LESS (i, en)"
    echo "    s  = SWITCH (i, p)"
    echo "    x0 = IDENTITY (s:1)"
    for k in $(seq 1 200); do echo "    x$k = IDENTITY (x$((k - 1)))"; done
    echo "    i2 = ADD (x200, i64 1)"
    echo "    ni = NEXTITER (i2)"
    echo "    out = EXIT chain (s:0)"
    echo "}"
} >"$TMP/chain.tfasm"
# sum 1..n: the one-op body of the loop pattern (docs/isa.md, "Loops")
cat >"$TMP/loop.tfasm" <<'P'
entry main(n: i64) -> (r: i64) {
    n  = ARG 0
    z  = CONST i64 0
    ei = ENTER lp (z)
    en = ENTER lp const (n)
         RESULT 0 (lp.out)
}
loop lp in main {
    i   = MERGE (ei, ni)
    p   = LESS (i, en)
    s   = SWITCH (i, p)
    i2  = ADD (s:1, i64 1)
    ni  = NEXTITER (i2)
    out = EXIT lp (s:0)
}
P

echo "VM floors (one thread, deterministic):"
read -r w f <<<"$(best_of "$TMP/chain.tfasm" 1 20000)"
awk -v w="$w" -v f="$f" 'BEGIN { printf "  chain of trivial instructions: %10d firings in %.3f s = %5.1f ns per firing (goal: <= 10)\n", f, w, w * 1e9 / f }'
read -r w f <<<"$(best_of "$TMP/loop.tfasm" 1 1000000)"
awk -v w="$w" -v f="$f" 'BEGIN { printf "  while loop, one-op body:       %10d iterations in %.3f s = %5.1f ns per iteration (%.1f firings each)\n", 1000000, w, w * 1e9 / 1000000, f / 1000000 }'

# A run that fires two instructions: what a run costs beyond its firings
# (arguments, the root context, waking the workers, results, teardown).
cat >"$TMP/trivial.tfasm" <<'P'
entry main() -> (r: i64) {
    c = CONST i64 42
        RESULT 0 (c)
}
P
# run_median_us [--threads N]: the median of 2001 in-process runs, in us.
# `tfvm profile` prints the median as "real X s median" with 6 decimals, too
# coarse below a few us, and "N firings ...; X ns per firing" with X =
# median / N: the median is taken from "real X us median" if profile prints
# that, else from the firings line, else from the seconds.
run_median_us() {
    "$TFVM" profile "$@" --runs 2001 --warmup 200 --top 1 "$TMP/trivial.tfasm" >"$TMP/prof" 2>&1 || { echo "-"; return; }
    local fired nsf real realus
    fired=$(sed -n 's/^one run: \([0-9]*\) firings.*/\1/p' "$TMP/prof")
    nsf=$(sed -n 's/.*; \([0-9.]*\) ns per firing.*/\1/p' "$TMP/prof")
    real=$(sed -n 's/^ *real \([0-9.]*\) s median.*/\1/p' "$TMP/prof")
    realus=$(sed -n 's/^ *real \([0-9.]*\) us median.*/\1/p' "$TMP/prof")
    if [ -n "$realus" ]; then
        echo "$realus"
    elif [ -n "$fired" ] && [ -n "$nsf" ]; then
        awk -v f="$fired" -v x="$nsf" 'BEGIN { printf "%.3f", f * x / 1000 }'
    elif [ -n "$real" ]; then
        awk -v r="$real" 'BEGIN { printf "%.3f", r * 1e6 }'
    else
        echo "-"
    fi
}
# target NAME VALUE UNIT LIMIT: VALUE <= LIMIT passes ("-": not measured, a MISS)
target() {
    awk -v n="$1" -v v="$2" -v u="$3" -v l="$4" 'BEGIN {
        ok = v != "-" && v + 0 <= l + 0
        printf "  %-56s %9s %-2s  target <= %s %s   %s\n", n, v, u, l, u, ok ? "PASS" : "MISS"
    }'
}

workers=$("$TFVM" run --stats "$TMP/trivial.tfasm" 2>&1 >/dev/null | sed -n 's/^scheduler: \([0-9]*\) workers.*/\1/p')
echo "per-run targets (issue 13):"
target "trivial program, one run, default threads (${workers:-1})" "$(run_median_us)" us 20
us1=$(run_median_us --threads 1)
printf '  %-56s %9s us  (for comparison)\n' "trivial program, one run, 1 thread" "$us1"
read -r w f <<<"$(REPS=7 best_of bench/loop100k.tfg 1 100000)"
out=$("$TFVM" run --threads 1 bench/loop100k.tfg 100000 2>&1)
[ "$out" = 199999 ] || echo "  bench/loop100k.tfg 100000: want 199999, got '$out'"
ns=$(awk -v w="$w" 'BEGIN { if (w > 0) printf "%.1f", w * 1e9 / 100000; else print "-" }')
target "while loop acc += (i*i) % 7, 100k iterations, 1 thread" "$ns" ns 100
read -r w f <<<"$(REPS=7 best_of bench/loop100k.tfg 0 100000)"
ns=$(awk -v w="$w" 'BEGIN { if (w > 0) printf "%.1f", w * 1e9 / 100000; else print "-" }')
printf '  %-56s %9s ns  (for comparison)\n' "the same loop, default threads" "$ns"

# "recursion too deep" in time proportional to the depth reached (issue 30:
# 3.9 s once): an endless recursion under two address-space limits (ulimit
# -v 1 and 4 GB; the default bound follows the limit), CPU seconds (user +
# sys, this shared machine's load aside) per level reached, best of 3. The
# deeper run must cost at most 1.5x as much per level as the shallower.
printf 'fn f(n: i32) -> i32 {\n    f(n + 1) + 1\n}\nfn main(n: i32) -> i32 { f(n) }\n' >"$TMP/endless.tfg"
# deep_ns KB: "depth ns-per-level" of the endless recursion under ulimit -v KB
deep_ns() {
    local best='' depth=''
    for _ in 1 2 3; do
        local line d t
        line=$( (ulimit -v "$1" && TIMEFORMAT='%U %S' && time "$TFVM" run --threads 1 "$TMP/endless.tfg" 1 >/dev/null 2>"$TMP/deep.err") 2>&1)
        d=$(sed -n 's/.* at depth \([0-9]*\) .*/\1/p' "$TMP/deep.err")
        [ -n "$d" ] || { echo "- -"; return; }
        t=$(awk -v l="$line" -v d="$d" 'BEGIN { split(l, a, " "); printf "%.1f", (a[1] + a[2]) * 1e9 / d }')
        if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
        depth=$d
    done
    echo "$depth $best"
}
read -r d1 n1 <<<"$(deep_ns 1000000)"
read -r d4 n4 <<<"$(deep_ns 4000000)"
echo "recursion too deep (issue 30), 1 thread: depth $d1 at $n1 ns CPU per level, depth $d4 at $n4 ns"
if [ "$n1" != - ] && [ "$n4" != - ] && awk -v a="$n4" -v b="$n1" 'BEGIN { exit !(a <= 1.5 * b) }'; then
    echo "PASS  recursion too deep: reported in time proportional to the depth (per level at depth $d4 <= 1.5x at $d1)"
else
    echo "MISS  recursion too deep: reported in time proportional to the depth (per level at depth $d4 <= 1.5x at $d1)"
fi
