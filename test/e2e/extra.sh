#!/usr/bin/env bash
# test/e2e/extra.sh TFVM BUILD TMP — end-to-end checks that take more than one
# command: memory bounds from --stats, .npy results written and read back,
# and the embedding example built against an installed copy via pkg-config.
set -u
TFVM=$1 BUILD=$2 TMP=$3
SAN=${SAN:-}
status=0
say() { echo "extra: $*"; }
no() { echo "FAIL (extra): $*"; status=1; }

# fib(25): contexts are reclaimed (peak in the hundreds at most), memory small.
"$TFVM" asm examples/asm/fib.tfasm -o "$TMP/fib.tfvm" || no "asm fib"
out=$("$TFVM" run --stats "$TMP/fib.tfvm" 25 2>"$TMP/stats")
[ "$out" = "121393" ] || no "fib 25 printed '$out'"
peak=$(sed -n 's/.*contexts peak \([0-9]*\).*/\1/p' "$TMP/stats")
mem=$(sed -n 's/.*peak memory \([0-9.]*\) MB.*/\1/p' "$TMP/stats")
if [ -z "$peak" ] || [ "$peak" -ge 1000 ]; then no "fib 25 peak contexts '$peak' (want < 1000): $(cat "$TMP/stats")"; fi
if [ -z "$SAN" ] && ! awk -v m="$mem" 'BEGIN { exit !(m < 64) }'; then no "fib 25 peak memory $mem MB (want < 64)"; fi
say "fib(25): peak contexts $peak, peak memory $mem MB"

# A tensor result written with -o, read back as an argument.
cat >"$TMP/mk.tfasm" <<'P'
entry main() -> (t: f32[]) {
    t = CONST f32[2, 3] [[1, 2, 3], [4, 5, 6.5]]
        RESULT 0 (t)
}
P
cat >"$TMP/twice.tfasm" <<'P'
entry main(x: f32[]) -> (y: f32[]) {
    x = ARG 0
    y = ADD (x, x)
        RESULT 0 (y)
}
P
"$TFVM" run "$TMP/mk.tfasm" -o t="$TMP/t.npy" || no "run -o"
out=$("$TFVM" run "$TMP/twice.tfasm" "@$TMP/t.npy" 2>&1)
[ "$out" = "[[2.0, 4.0, 6.0], [8.0, 10.0, 13.0]]" ] || no "tensor round trip printed '$out'"
"$TFVM" run "$TMP/twice.tfasm" "@$TMP/t.npy" -o 0="$TMP/u.npy" || no "run -o 0=..."
out=$("$TFVM" run "$TMP/twice.tfasm" "@$TMP/u.npy" 2>&1)
[ "$out" = "[[4.0, 8.0, 12.0], [16.0, 20.0, 26.0]]" ] || no "-o by position printed '$out'"

# The embedding example, built against `make install` through pkg-config.
prefix="$TMP/prefix"
if make -s install PREFIX="$prefix" BUILD="$BUILD" SAN="$SAN" >"$TMP/install.log" 2>&1; then
    flags=
    [ -n "$SAN" ] && flags="-fsanitize=$SAN"
    if PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -C examples/embed -B CFLAGS="$flags" LDFLAGS="$flags" \
        embed >"$TMP/embed.log" 2>&1; then
        out=$(LD_LIBRARY_PATH="$prefix/lib" examples/embed/embed "$TMP/fib.tfvm" 20 2>&1)
        [ "$out" = "fib(20) = 10946" ] || no "embed printed '$out'"
        rm -f examples/embed/embed
    else
        no "examples/embed does not build: $(cat "$TMP/embed.log")"
    fi
else
    no "make install failed: $(cat "$TMP/install.log")"
fi
exit $status
