#!/usr/bin/env bash
# bench/sched.sh — the VM's floors, measured in this run: ns per firing on a
# long chain of trivial instructions, and ns per iteration of a while loop
# with a one-op body (--threads 1, the deterministic scheduler). Times are the
# run's wall time from --stats, best of 3. (The 2-thread speed-ups are in
# bench/run.sh's table.)
set -u
TFVM=${TFVM:-build/bin/tfvm}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFVM" ] || { echo "bench: $TFVM not built (run make)"; exit 1; }

# best_of PROG THREADS ARGS... -> "wall fired"
best_of() {
    local prog=$1 threads=$2 best= fired=
    shift 2
    for _ in 1 2 3; do
        "$TFVM" run --stats --threads "$threads" "$prog" "$@" >/dev/null 2>"$TMP/stats" || { echo "fail"; return; }
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
# sum 1..n: the one-op body of ISA.md's loop pattern
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
