#!/usr/bin/env bash
# bench/ipf.sh — `make bench-ipf`: instructions per firing, per call and per
# loop iteration on one thread, counted by valgrind (callgrind), so the numbers
# do not depend on the machine's load (times on a shared machine do). Each
# program runs at two sizes and the counts are the differences, which leaves
# out loading, compiling and the run's fixed cost. For the before/after table
# of docs/scheduler.md: run it on two builds (TFVM=...).
set -u
TFVM=${TFVM:-build/bin/tfvm}
CC=${CC:-cc}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -x "$TFVM" ] || { echo "bench: $TFVM not built (run make)"; exit 1; }
command -v valgrind >/dev/null 2>&1 || { echo "bench-ipf: valgrind not found (apt-get install valgrind)"; exit 0; }
$CC -O2 -o "$TMP/ref" bench/ref.c || { echo "bench: cannot build bench/ref.c"; exit 1; }

# count PROG ARGS... -> "instructions firings": one run under callgrind
count() {
    # shellcheck disable=SC2068
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$TFVM" run --stats --threads 1 "$@" \
        >/dev/null 2>"$TMP/out" || { echo "- -"; return; }
    echo "$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/out") $(sed -n 's/.*fired \([0-9]*\),.*/\1/p' "$TMP/out")"
}

# name | program | big args | small args | reference name (calls counted by bench/ref.c), or "loop N-M" (iterations)
ROWS=(
    "fib|examples/fib.tfg|20|15|fib"
    "takeuchi|examples/takeuchi.tfg|18 12 6|12 8 4|tak"
    "ackermann|examples/ackermann.tfg|3 5|3 3|ack"
    "primes|examples/primes.tfg|2000|500|primes"
    "loop100k (acc += (i*i) % 7)|bench/loop100k.tfg|100000|0|loop 100000"
    "sum_loop|examples/sum_loop.tfg|100000|0|loop 100000"
)
echo "instructions (valgrind callgrind, one thread), differences between two sizes of each program:"
printf '  %-30s %-18s %12s %14s %10s %12s\n' program sizes firings instructions "per firing" "per call/iter"
for r in "${ROWS[@]}"; do
    IFS='|' read -r name prog big small ref <<<"$r"
    # shellcheck disable=SC2086
    read -r i1 f1 <<<"$(count "$prog" $big)"
    # shellcheck disable=SC2086
    read -r i0 f0 <<<"$(count "$prog" $small)"
    if [ "$i1" = - ] || [ "$i0" = - ] || [ -z "$i1" ] || [ -z "$i0" ]; then
        echo "  $name: failed: $(tail -3 "$TMP/out")"
        continue
    fi
    case $ref in
    loop*) calls=${ref#loop } ;;
    *)
        # shellcheck disable=SC2086
        c1=$("$TMP/ref" $ref $big | cut -d' ' -f2)
        # shellcheck disable=SC2086
        c0=$("$TMP/ref" $ref $small | cut -d' ' -f2)
        calls=$((c1 - c0))
        ;;
    esac
    awk -v n="$name" -v s="$big / $small" -v i="$((i1 - i0))" -v f="$((f1 - f0))" -v c="$calls" 'BEGIN {
        printf "  %-30s %-18s %12d %14d %10.1f %12.1f\n", n, s, f, i, (f > 0 ? i / f : 0), (c > 0 ? i / c : 0)
    }'
done
