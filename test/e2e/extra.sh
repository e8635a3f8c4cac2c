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
# A tiny run on two workers (the peak is sampled there) still says a context was live.
peak=$("$TFVM" run --stats --threads 2 examples/asm/fib.tfasm 1 2>&1 >/dev/null | sed -n 's/.*contexts peak \([0-9]*\),.*/\1/p')
[ "$peak" = 1 ] || no "fib(1) on two workers: contexts peak '$peak', want 1"

# An endless recursion under a memory limit (ulimit -v, 4 GB) stops at the
# default context bound, which the limit lowers, with a message that names
# the function, the depth and the call's position, and gives the tag's two
# ends (the counts vary with the memory: N here, the tag's 32 shown and N
# more making the depth), on 1 and 2 threads (not under a sanitizer: its
# shadow memory does not fit such a limit).
if [ -z "$SAN" ]; then
    printf 'fn f(n: i32) -> i32 {\n    f(n + 1) + 1\n}\nfn main(n: i32) -> i32 { f(n) }\n' >"$TMP/endless.tfg"
    for t in 1 2; do
        err=$( (ulimit -v 4000000 && "$TFVM" run "$TMP/endless.tfg" --threads $t 1) 2>&1 >/dev/null)
        rc=$?
        f15=$(printf ', f@0%.0s' $(seq 15))
        want="tfvm: recursion too deep in 'f' at depth N (the call at $TMP/endless.tfg:2:5): more than N live contexts (the bound for the memory available; max_contexts sets another) at [f@1$f15, ... N more ...$f15, f@0]"
        got=$(echo "$err" | sed -E 's/depth [0-9]+/depth N/; s/more than [0-9]+/more than N/; s/\.\.\. [0-9]+ more/... N more/')
        depth=$(echo "$err" | sed -E 's/.* at depth ([0-9]+) .*/\1/') more=$(echo "$err" | sed -E 's/.*\.\.\. ([0-9]+) more.*/\1/')
        [ $rc = 1 ] && [ "$got" = "$want" ] && [ "$depth" = $((more + 32)) ] ||
            no "endless recursion under ulimit -v, $t threads: rc=$rc '${err:0:400}'"
    done
    say "endless recursion under ulimit -v 4000000: ${err:0:90}..."
fi

# --feed values the run never takes are said (stderr), the run still succeeds.
out=$("$TFVM" run test/e2e/feed_loop.tfg 2 --feed x=1,2,3,4 2>"$TMP/feed.err")
[ $? = 0 ] && [ "$out" = "$(printf 'fetch sum: 1\nfetch sum: 5\n5')" ] &&
    [ "$(cat "$TMP/feed.err")" = "tfvm: warning: --feed x: 2 of 4 values were not taken" ] ||
    no "feed_loop with 2 values too many: '$out', '$(cat "$TMP/feed.err")'"
out=$("$TFVM" run test/e2e/feed_loop.tfg 2 --feed x=1,2 2>"$TMP/feed.err")
[ "$out" = "$(printf 'fetch sum: 1\nfetch sum: 5\n5')" ] && [ ! -s "$TMP/feed.err" ] ||
    no "feed_loop with every value taken: '$out', '$(cat "$TMP/feed.err")'"

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

# -o by position with several results; the scalar becomes a rank-0 array.
out=$("$TFVM" run examples/gcd.tfg 1071 462 -o 1="$TMP/b.npy")
[ "$out" = "g: 21" ] || no "-o 1=... printed '$out'"
[ "$(tail -c 1 "$TMP/b.npy" | od -An -tu1 | tr -d ' ')" = "1" ] || no "-o 1=... did not write true"

# Arguments by name, for every format: .tfasm, .tfg, and the .tfvm compiled
# from each; an @path holding '='; several parameters missing at once.
cat >"$TMP/three.tfasm" <<'P'
entry main(a: i32, b: i32, t: f32[]) -> (s: i32, u: f32[]) {
    a = ARG 0
    b = ARG 1
    t = ARG 2
    s = SUB (a, b)
    u = ADD (t, t)
        RESULT 0 (s)
        RESULT 1 (u)
}
P
cp "$TMP/t.npy" "$TMP/x=y.npy"
"$TFVM" asm "$TMP/three.tfasm" -o "$TMP/three.tfvm" || no "asm three"
for f in "$TMP/three.tfasm" "$TMP/three.tfvm"; do
    out=$("$TFVM" run "$f" t="@$TMP/x=y.npy" b=5 a=7 2>&1 | paste -sd'|')
    [ "$out" = "s: 2|u: [[2.0, 4.0, 6.0], [8.0, 10.0, 13.0]]" ] || no "$f by name printed '$out'"
    out=$("$TFVM" run "$f" 7 5 "@$TMP/x=y.npy" -o u="$TMP/u3.npy" 2>&1)
    [ "$out" = "s: 2" ] && cmp -s "$TMP/u3.npy" "$TMP/u.npy" || no "$f by position with -o u=: '$out'"
    out=$("$TFVM" run "$f" 7 2>&1)
    [ $? -eq 2 ] && [ "$out" = "tfvm: main(a: i32, b: i32, t: f32[...]) takes 3 arguments, got 1" ] || no "$f 7: '$out'"
    out=$("$TFVM" run "$f" 7 t="@$TMP/x=y.npy" 2>&1)
    [ "$out" = "tfvm: main(a: i32, b: i32, t: f32[...]): no argument for parameter 'b'" ] || no "$f missing b: '$out'"
    out=$("$TFVM" run "$f" a=7 2>&1)
    [ "$out" = "tfvm: main(a: i32, b: i32, t: f32[...]): no argument for parameters 'b', 't'" ] || no "$f missing b, t: '$out'"
    out=$("$TFVM" run "$f" 7 5 t="@$TMP/no=such.npy" 2>&1)
    [ "$out" = "tfvm: argument 3 't': $TMP/no=such.npy: No such file or directory" ] || no "$f missing npy: '$out'"
done
"$TFVM" compile examples/gcd.tfg -o "$TMP/gcd.tfvm" || no "compile gcd"
out=$("$TFVM" run "$TMP/gcd.tfvm" b=462 a=1071 -o agree="$TMP/agree.npy")
[ "$out" = "g: 21" ] && [ "$(tail -c 1 "$TMP/agree.npy" | od -An -tu1 | tr -d ' ')" = "1" ] || no "gcd.tfvm by name: '$out'"

# Formats: .tfvm bytes are recognised by content whatever the name; a name
# that says nothing and bytes that are not .tfvm give one line.
cp "$TMP/gcd.tfvm" "$TMP/gcd.onnx"
cp "$TMP/gcd.tfvm" "$TMP/gcd_tfvm"
for f in "$TMP/gcd.onnx" "$TMP/gcd_tfvm"; do
    out=$("$TFVM" run "$f" 1071 b=462 | paste -sd'|')
    [ "$out" = "g: 21|agree: true" ] || no "$f (.tfvm bytes) printed '$out'"
done
printf 'garbage' >"$TMP/model.bin"
out=$("$TFVM" run "$TMP/model.bin" 2>&1)
[ $? -eq 1 ] && [ "$out" = "tfvm: $TMP/model.bin: unknown format (not .tfvm bytecode, and the name does not end in .tfvm, .tfasm, .tfg, .onnx or .pb)" ] ||
    no "garbage without a known suffix: '$out'"
out=$(printf 'garbage' | "$TFVM" run - 2>&1)
[ "$out" = "tfvm: -: unknown format (not .tfvm bytecode, and the name does not end in .tfvm, .tfasm, .tfg, .onnx or .pb)" ] ||
    no "garbage on stdin: '$out'"
out=$("$TFVM" run - 1071 462 <"$TMP/gcd.tfvm" | paste -sd'|')
[ "$out" = "g: 21|agree: true" ] || no ".tfvm on stdin printed '$out'"
# compile: .tfg from stdin as before; .tfasm is taken too; the default output name.
# The same program either way, but only the file has a name for its positions
# (the `source` line and the blank line after it).
"$TFVM" compile - -o "$TMP/fib_stdin.tfvm" <examples/fib.tfg && "$TFVM" compile examples/fib.tfg -o "$TMP/fib_file.tfvm" &&
    [ "$("$TFVM" dis "$TMP/fib_file.tfvm" | head -1)" = 'source "examples/fib.tfg"' ] &&
    cmp -s <("$TFVM" dis "$TMP/fib_stdin.tfvm") <("$TFVM" dis "$TMP/fib_file.tfvm" | tail -n +3) ||
    no "compile - (stdin .tfg) differs from the file"
"$TFVM" compile "$TMP/three.tfasm" -o "$TMP/three2.tfvm" && cmp -s "$TMP/three.tfvm" "$TMP/three2.tfvm" ||
    no "compile .tfasm differs from asm"
cp examples/fib.tfg "$TMP/fibc.tfg"
"$TFVM" compile "$TMP/fibc.tfg" && [ -f "$TMP/fibc.tfvm" ] || no "compile X.tfg did not write X.tfvm"

# ONNX (test/e2e/onnx/named.onnx, written by gen.py there): names the way
# exporters write them, arguments and results by name, compile to .tfvm.
M=test/e2e/onnx/named.onnx
out=$("$TFVM" run "$M" "x:0=@$TMP/t.npy" scale/factor=3 2>&1 | paste -sd'|')
[ "$out" = "y/out:0: [[3.0, 6.0, 9.0], [12.0, 15.0, 19.5]]|z.plus: [[2.0, 4.0, 6.0], [8.0, 10.0, 13.0]]" ] || no "$M by name printed '$out'"
out=$("$TFVM" run "$M" scale/factor=3 x=@"$TMP/t.npy" -o z.plus="$TMP/z.npy" 2>&1)
[ "$out" = "y/out:0: [[3.0, 6.0, 9.0], [12.0, 15.0, 19.5]]" ] && cmp -s "$TMP/z.npy" "$TMP/u.npy" || no "$M -o z.plus=: '$out'"
out=$("$TFVM" run "$M" "@$TMP/t.npy" 2 -o "y/out:0=$TMP/y.npy" -o 1="$TMP/z1.npy" 2>&1)
[ -z "$out" ] && cmp -s "$TMP/y.npy" "$TMP/u.npy" && cmp -s "$TMP/z1.npy" "$TMP/u.npy" || no "$M -o y/out:0= -o 1=: '$out'"
out=$("$TFVM" run "$M" "@$TMP/t.npy" 2 -o "y/out=$TMP/y2.npy" 2>&1)
[ "$out" = "z.plus: [[2.0, 4.0, 6.0], [8.0, 10.0, 13.0]]" ] && cmp -s "$TMP/y2.npy" "$TMP/u.npy" || no "$M -o y/out= (for y/out:0): '$out'"
# --save-outputs: names that clash once file-safe get _K; ".." never names the parent
cat >"$TMP/clash.tfasm" <<'P'
entry main(a: i32) -> ("a/b": i32, a_b: i32, "..": i32) {
    a = ARG 0
        RESULT 0 (a)
        RESULT 1 (a)
        RESULT 2 (a)
}
P
out=$("$TFVM" run "$TMP/clash.tfasm" 3 --save-outputs "$TMP/clash" 2>&1)
[ -z "$out" ] && [ "$(LC_ALL=C ls "$TMP/clash" | paste -sd' ')" = "__.npy a_b.npy a_b_1.npy" ] ||
    no "--save-outputs with clashing names: '$out' $(ls "$TMP/clash")"
# --save-outputs: every result as DIR/NAME.npy, names made file-safe (y/out:0 is y_out_0.npy)
out=$("$TFVM" run "$M" "@$TMP/t.npy" 2 --save-outputs "$TMP/saved" -o "z.plus=$TMP/z2.npy" 2>&1)
[ -z "$out" ] && [ "$(ls "$TMP/saved")" = "y_out_0.npy" ] && cmp -s "$TMP/saved/y_out_0.npy" "$TMP/u.npy" &&
    cmp -s "$TMP/z2.npy" "$TMP/u.npy" || no "$M --save-outputs: '$out' $(ls "$TMP/saved")"
out=$("$TFVM" run "$M" scale/factor=2 2>&1)
[ "$out" = 'tfvm: main("x:0": f32[2, 3], "scale/factor": f32): no argument for parameter '"'x:0'" ] || no "$M missing x:0: '$out'"
out=$("$TFVM" run "$M" "@$TMP/t.npy" 2 -o nope="$TMP/n.npy" 2>&1)
[ "$out" = "tfvm: -o nope: entry 'main' has no result named 'nope'" ] || no "$M -o nope: '$out'"
cp "$M" "$TMP/named.onnx"
"$TFVM" compile "$TMP/named.onnx" && [ -f "$TMP/named.tfvm" ] || no "compile X.onnx did not write X.tfvm"
out=$("$TFVM" run "$TMP/named.tfvm" "@$TMP/t.npy" scale/factor=2 -o z.plus=/dev/null 2>&1)
[ "$out" = "y/out:0: [[2.0, 4.0, 6.0], [8.0, 10.0, 13.0]]" ] || no "named.tfvm printed '$out'"
"$TFVM" dis "$M" | "$TFVM" asm - -o "$TMP/named2.tfvm" && cmp -s "$TMP/named.tfvm" "$TMP/named2.tfvm" ||
    no "tfvm dis $M | tfvm asm does not give back the bytes of tfvm compile"
"$TFVM" profile --runs 1 --warmup 0 "$M" "x:0=@$TMP/t.npy" scale/factor=2 >/dev/null 2>&1 || no "profile $M by name"
"$TFVM" dot "$M" | grep -q '^digraph' || no "tfvm dot $M"
# Models of test/onnx/models (test/onnx/make_models.py): a Loop with a scan
# output, by name and by position with -o; external data found next to the
# model from any working directory.
cat >"$TMP/mk2.tfasm" <<'P'
entry main() -> (a: f32[], b: f32[]) {
    a = CONST f32[2] [1, 2]
    b = CONST f32[1, 2] [[1, 1]]
        RESULT 0 (a)
        RESULT 1 (b)
}
P
"$TFVM" run "$TMP/mk2.tfasm" -o a="$TMP/x2.npy" -o b="$TMP/x12.npy" || no "mk2"
out=$("$TFVM" run test/onnx/models/loop_scan.onnx n=3 x=@"$TMP/x2.npy" 2>&1 | paste -sd'|')
[ "$out" = "xf: [4.0, 5.0]|stack: [[0.0, 0.0], [3.0, 4.0], [8.0, 10.0]]" ] || no "loop_scan.onnx by name printed '$out'"
out=$("$TFVM" run test/onnx/models/loop_scan.onnx "@$TMP/x2.npy" 3 -o stack="$TMP/st.npy" 2>&1)
out2=$("$TFVM" run "$TMP/twice.tfasm" "@$TMP/st.npy" 2>&1)
[ "$out" = "xf: [4.0, 5.0]" ] && [ "$out2" = "[[0.0, 0.0], [6.0, 8.0], [16.0, 20.0]]" ] || no "loop_scan.onnx -o stack=: '$out' '$out2'"
# An initializer named like a graph input (mlp.onnx, IR 8: W1) is the
# input's default: `tfvm info` says so; left out, the initializer is used,
# fed, the fed value; through a compiled .tfvm too (issue 27 row 11).
cat >"$TMP/mk3.tfasm" <<'P'
entry main() -> (x: f32[], w: f32[]) {
    x = CONST f32[2, 4] [[1, 2, 3, 4], [-1, 0, 1, 2]]
    w = CONST f32[4, 3] [[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]]
        RESULT 0 (x)
        RESULT 1 (w)
}
P
"$TFVM" run "$TMP/mk3.tfasm" -o x="$TMP/x24.npy" -o w="$TMP/w43.npy" || no "mk3"
out=$("$TFVM" info test/onnx/models/mlp.onnx | grep '^entry')
[ "$out" = "entry main(x: f32[2, 4], W1: f32[4, 3] = default) -> (y: f32[2, 2])" ] || no "info mlp.onnx: '$out'"
"$TFVM" compile test/onnx/models/mlp.onnx -o "$TMP/mlp.tfvm" || no "compile mlp.onnx"
for m in test/onnx/models/mlp.onnx "$TMP/mlp.tfvm"; do
    out=$("$TFVM" run "$m" "@$TMP/x24.npy" 2>&1)
    [ "$out" = "[[44.5, 50.5], [36.5, 34.5]]" ] || no "$m with W1 left to its default: '$out'"
    out=$("$TFVM" run "$m" "@$TMP/x24.npy" "W1=@$TMP/w43.npy" 2>&1)
    [ "$out" = "[[24.5, 20.5], [8.5, 4.5]]" ] || no "$m with W1 fed: '$out'"
    out=$("$TFVM" run "$m" "W1=@$TMP/w43.npy" 2>&1)
    [ "$out" = "tfvm: main(x: f32[2, 4], W1: f32[4, 3] = default): no argument for parameter 'x'" ] ||
        no "$m without x: '$out'"
done
abs_tfvm=$(cd "$(dirname "$TFVM")" && pwd)/$(basename "$TFVM")
out=$(cd "$TMP" && "$abs_tfvm" run "$OLDPWD/test/onnx/models/external.onnx" x=@x12.npy 2>&1)
[ "$out" = "[[4.0, 6.0]]" ] || no "external.onnx from another directory printed '$out'"

# An imported Cast of NaN, +-inf and out-of-range floats to integers gives
# what ONNX Runtime 1.23 gives on x86 (these lines are its outputs); .tfg's
# cast<> keeps its error.
out=$("$TFVM" run test/onnx/models/cast_x86.onnx x=@test/tf/fixtures/cast_x86.in0.npy 2>&1 | paste -sd'|')
[ "$out" = "i8: [0, 0, 0, 0, 0, 0, 0, 44, 127, 2, -2, 112]|u8: [0, 0, 0, 0, 0, 0, 0, 44, 127, 2, 254, 112]|i32: [-2147483648, -2147483648, -2147483648, -2147483648, -2147483648, -2147483648, -2147483648, 300, -129, 2, -2, 70000]|i64: [-9223372036854775808, -9223372036854775808, -9223372036854775808, 3000000000, -3000000000, -9223372036854775808, -9223372036854775808, 300, -129, 2, -2, 70000]" ] ||
    no "cast_x86.onnx printed '$out'"
printf 'fn main(x: f32) -> i64 { cast<i64>(x) }\n' >"$TMP/cast.tfg"
out=$("$TFVM" run "$TMP/cast.tfg" nan 2>&1)
[ $? -eq 1 ] && [ "$out" = "tfvm: $TMP/cast.tfg:1:26: cast_1_26 (CAST) at []: cannot cast f32 nan to i64" ] || no ".tfg cast of nan: '$out'"
printf 'garbage' >"$TMP/bad.onnx"
for cmd in run compile dis; do
    out=$("$TFVM" $cmd "$TMP/bad.onnx" 2>&1)
    [ $? -eq 1 ] && [ "$out" = "tfvm: $TMP/bad.onnx: bad .onnx file (not a valid ModelProto: truncated or corrupt protobuf)" ] ||
        no "$cmd garbage .onnx: '$out'"
done

# TensorFlow GraphDefs (test/tf/fixtures, test/tf/gen.py): feeds by name
# ("n" or "n:0"), fetches chosen with --outputs, results by name with -o.
F=test/tf/fixtures
out=$("$TFVM" run "$F/fib.pb" n=15 2>&1) && [ "$out" = "987" ] || no "fib.pb n=15 printed '$out'"
out=$("$TFVM" run "$F/fib.pb" n:0=15 2>&1) && [ "$out" = "987" ] || no "fib.pb n:0=15 printed '$out'"
out=$("$TFVM" run "$F/cond_v1.pb" --outputs cond/Merge:0 x=@"$F/cond_v1.in1.npy" p=true -o cond/Merge="$TMP/m.npy" 2>&1)
[ -z "$out" ] && cmp -s "$TMP/m.npy" "$F/cond_v1.out0.npy" || no "cond_v1.pb -o cond/Merge=: '$out'"
out=$("$TFVM" run --outputs while/Exit:0,while/Exit_1:0 "$F/while_scalar.pb" x=1.5 n=10 2>&1 | paste -sd'|')
[ "$out" = "while/Exit:0: 10|while/Exit_1:0: 2.9970703" ] || no "while_scalar.pb --outputs a,b printed '$out'"
"$TFVM" compile "$F/while_scalar.pb" -o "$TMP/w.tfvm" --outputs while/Exit:0,while/Exit_1:0 || no "compile .pb --outputs"
out=$("$TFVM" run "$TMP/w.tfvm" 10 x=1.5 -o while/Exit_1="$TMP/w1.npy" 2>&1)
[ "$out" = "while/Exit:0: 10" ] && cmp -s "$TMP/w1.npy" "$F/while_scalar.out1.npy" || no "w.tfvm from .pb: '$out'"
out=$("$TFVM" run --outputs nope "$F/fib.pb" n=1 2>&1)
[ $? -eq 2 ] && [ "$out" = "tfvm: $F/fib.pb: output 'nope' names no node" ] || no "--outputs nope: '$out'"
# TF2 models as users have them (test/tf/gen.py): a Keras LSTM and GRU and a
# tf.while_loop decoder, each a SavedModel directory (NAME_sm, parameters
# and results named by serving_default's keys) and a default TF2 freeze
# (NAME.pb, whose unused_control_flow_input Placeholders are left out with a
# note); both match TensorFlow's outputs.
close_to() { "$TFVM" run test/e2e/models/check.tfg "@$1" "@$2" 2>&1 | head -1 | sed 's/^close: //'; }
for m in keras_lstm keras_gru; do
    for form in "$F/${m}_sm" "$F/$m.pb"; do
        "$TFVM" run "$form" x=@"$F/$m.in0.npy" -o 0="$TMP/o.npy" 2>"$TMP/err" &&
            [ "$(close_to "$TMP/o.npy" "$F/$m.out0.npy")" = true ] || no "$form: $(cat "$TMP/err")"
    done
done
out=$("$TFVM" info "$F/keras_lstm.pb" 2>&1 >/dev/null)
[ "$out" = "$F/keras_lstm.pb: note: 12 Placeholders that no result depends on are not parameters: 'unused_control_flow_input', 'unused_control_flow_input_1', 'unused_control_flow_input_2', 'unused_control_flow_input_4', ..." ] ||
    no "keras_lstm.pb note: '$out'"
out=$("$TFVM" info "$F/keras_lstm_sm" 2>&1 | tail -1)
[ "$out" = "entry main(x: f32[?, 5, 3]) -> (output_0: f32[...])" ] || no "info keras_lstm_sm: '$out'"
"$TFVM" compile "$F/while_decoder_sm/" -o "$TMP/dec.tfvm" || no "compile while_decoder_sm"
for prog in "$TMP/dec.tfvm" "$F/while_decoder.pb"; do
    names="state tokens"
    [ "$prog" = "$F/while_decoder.pb" ] && names="Identity Identity_1"
    set -- $names
    "$TFVM" run "$prog" h0=@"$F/while_decoder.in0.npy" steps=5 -o "$1=$TMP/dec_s.npy" -o "$2=$TMP/dec_t.npy" 2>/dev/null &&
        [ "$(close_to "$TMP/dec_s.npy" "$F/while_decoder.out0.npy")" = true ] && cmp -s "$TMP/dec_t.npy" "$F/while_decoder.out1.npy" ||
        no "$prog: the decoder does not match TensorFlow"
done
out=$("$TFVM" run "$F/while_decoder_sm" h0=@"$F/while_decoder.in0.npy" steps=@"$F/while_decoder.in1.npy" -o '#0=/dev/null' 2>&1)
[ "$out" = "tokens: [[4, 3], [5, 0], [1, 3], [1, 2], [1, 3]]" ] || no "steps=@0-d.npy: '$out'"
out=$("$TFVM" run "$F/while_decoder_sm" h0=@"$F/while_decoder.in0.npy" steps=@"$F/while_decoder.in0.npy" 2>&1)
[ $? -eq 1 ] && [ "$out" = "tfvm: argument 2 'steps': expected i32 (a 0-d array), $F/while_decoder.in0.npy holds f32[2, 8]" ] ||
    no "steps=@2-d.npy: '$out'"
out=$("$TFVM" run "$F/while_decoder_sm/saved_model.pb" 2>&1)
[ $? -eq 1 ] && [ "$out" = "tfvm: $F/while_decoder_sm/saved_model.pb: a SavedModel's saved_model.pb, not a GraphDef: give its directory (tfvm run DIR), which holds the variables too" ] ||
    no "run saved_model.pb: '$out'"
out=$("$TFVM" run --signature nope "$F/while_decoder_sm" 2>&1)
[ $? -eq 2 ] && [ "$out" = "tfvm: $F/while_decoder_sm: no signature 'nope' (the SavedModel has: serving_default)" ] ||
    no "--signature nope: '$out'"
out=$("$TFVM" compile --signature serving_default "$F/fib.pb" -o "$TMP/x.tfvm" 2>&1)
[ $? -eq 2 ] && [ "$out" = "tfvm: --signature serving_default: only a SavedModel directory takes --signature, not $F/fib.pb" ] ||
    no "--signature on a .pb: '$out'"
printf 'garbage' >"$TMP/bad.pb"
for cmd in run compile dis; do
    out=$("$TFVM" $cmd "$TMP/bad.pb" 2>&1)
    [ $? -eq 1 ] && [ "$out" = "tfvm: $TMP/bad.pb: not a binary GraphDef (protobuf parse failed)" ] || no "$cmd garbage .pb: '$out'"
done

# Devices (docs/devices.md). The registry's lines on this host: the CPU's
# names its cores and BLAS; CUDA's says why it is not there.
out=$("$TFVM" devices)
cpu_line=$(printf '%s\n' "$out" | sed -n 1p)
cuda_line=$(printf '%s\n' "$out" | sed -n 2p)
printf '%s\n' "$cpu_line" | grep -Eq '^cpu: ready \([0-9]+ cores?, [^()]+\)$' || no "tfvm devices: cpu line '$cpu_line'"
if [ -e /dev/nvidia0 ]; then
    printf '%s\n' "$cuda_line" | grep -q '^cuda: ready (' || no "tfvm devices: cuda line '$cuda_line' with a GPU"
elif [ -f "$BUILD/lib/libtfvm_cuda.so" ]; then
    [ "$cuda_line" = "cuda: unavailable: no device found" ] || no "tfvm devices: cuda line '$cuda_line'"
else # (not found: built with nvcc, then removed)
    [ "$cuda_line" = "cuda: unavailable: libtfvm_cuda.so not built (no nvcc at build time)" ] ||
        [ "$cuda_line" = "cuda: unavailable: libtfvm_cuda.so not found (set TFVM_CUDA_LIB)" ] ||
        no "tfvm devices: cuda line '$cuda_line'"
fi
say "$cpu_line; $cuda_line"
out=$(TFVM_CUDA_LIB=/no/such/libtfvm_cuda.so "$TFVM" devices | sed -n 2p)
[ "$out" = "cuda: unavailable: cannot load /no/such/libtfvm_cuda.so: cannot open shared object file: No such file or directory" ] ||
    no "tfvm devices with a bad TFVM_CUDA_LIB: '$out'"

# --device cuda through the host stand-in for the CUDA backend
# (test/unit/fake_cuda.c): same results as the CPU, copies counted.
FAKE=${FAKE_CUDA:-$BUILD/test/libtfvm_fakecuda.so}
if [ -f "$FAKE" ]; then
    out=$(TFVM_CUDA_LIB=$FAKE "$TFVM" devices | sed -n 2p)
    [ "$out" = "cuda: ready (fake CUDA device in host memory, for tests)" ] || no "devices with the stand-in: '$out'"
    out=$(TFVM_CUDA_LIB=$FAKE FAKE_CUDA_NODEVICE=1 "$TFVM" run --device cuda "$TMP/twice.tfasm" "@$TMP/t.npy" 2>&1)
    rc=$?
    [ $rc -eq 1 ] && [ "$out" = "tfvm: cuda: unavailable: no device found" ] ||
        no "--device cuda without a GPU: rc=$rc '$out'"
    for dev in cuda auto; do
        out=$(TFVM_CUDA_LIB=$FAKE "$TFVM" run --device $dev "$TMP/twice.tfasm" "@$TMP/t.npy" 2>&1)
        [ "$out" = "[[2.0, 4.0, 6.0], [8.0, 10.0, 13.0]]" ] || no "--device $dev printed '$out'"
    done
    out=$(TFVM_CUDA_LIB=$FAKE TFVM_DEVICE=cuda "$TFVM" run --stats "$TMP/twice.tfasm" "@$TMP/t.npy" 2>&1 >/dev/null |
        sed -n 's/.*copies in \([0-9]*\) .* out \([0-9]*\) .*/\1 \2/p')
    [ "$out" = "1 1" ] || no "--stats with TFVM_DEVICE=cuda: copies in/out '$out', want '1 1'"
    TFVM_CUDA_LIB=$FAKE "$TFVM" run --device cuda "$TMP/twice.tfasm" "@$TMP/t.npy" -o 0="$TMP/u_cuda.npy" &&
        cmp -s "$TMP/u.npy" "$TMP/u_cuda.npy" || no "-o with --device cuda wrote a different file"
    out=$(TFVM_DEVICE=gpu "$TFVM" run "$TMP/twice.tfasm" "@$TMP/t.npy" 2>&1)
    [ "$out" = "tfvm: TFVM_DEVICE=gpu: expected cpu, cuda or auto (see 'tfvm run --help')" ] || no "TFVM_DEVICE=gpu: '$out'"
else
    no "$FAKE missing (make builds it with the tests)"
fi

# profile reads TFVM_THREADS as run does (issue 14: it ignored it)
out=$(TFVM_THREADS=x "$TFVM" profile examples/asm/fib.tfasm 3 2>&1)
[ "$out" = "tfvm: TFVM_THREADS=x: expected an integer from 1 to 1024 (see 'tfvm profile --help')" ] ||
    no "profile with TFVM_THREADS=x: '$out'"
out=$(TFVM_THREADS=1 "$TFVM" profile --runs 1 --warmup 0 examples/asm/fib.tfasm 3 2>&1 | head -1)
[ "$out" = "tfvm profile: examples/asm/fib.tfasm 3 (entry main), 1 worker thread (deterministic)" ] ||
    no "profile with TFVM_THREADS=1: '$out'"

# Ctrl-C stops a run, exit status 130, and says where the run was: the
# instruction next to fire and its line, the function and how many calls
# deep, the innermost loop and its iteration (which varies: #N here); on 1
# and 2 threads (a loop's frame either way).
printf 'fn spin(n: i64) -> i64 {\n    let (i, s) = while forever (i = n, s = 0i64; i >= 0) {\n        (i + 1, s + i)\n    };\n    s\n}\nfn main(n: i64) -> i64 { spin(n) + 1 }\n' >"$TMP/spin.tfg"
for t in 1 2; do
    for prog in examples/sum_loop.tfg:100000000000 "$TMP/spin.tfg:0"; do
        "$TFVM" run --threads $t "${prog%:*}" "${prog##*:}" 2>"$TMP/sigint.err" &
        pid=$!
        sleep 1
        kill -INT "$pid"
        wait "$pid"
        rc=$?
        case $prog in
        examples/*) want="tfvm: examples/sum_loop.tfg:11:50: interrupted at less_equal_11_50 (LESS_EQUAL) in 'main' at depth 0, iteration #N of loop 'sum_loop'" ;;
        *) want="tfvm: $TMP/spin.tfg:2:52: interrupted at greater_equal_2_52 (GREATER_EQUAL) in 'spin' at depth 1, iteration #N of loop 'forever'" ;;
        esac
        got=$(tail -n 1 "$TMP/sigint.err" | sed 's/#[0-9][0-9]*/#N/g')
        [ "$rc" = 130 ] && [ "$got" = "$want" ] ||
            no "SIGINT during ${prog%:*} on $t threads: exit $rc, stderr '$(cat "$TMP/sigint.err")'"
    done
done

# The embedding example, built against `make install` through pkg-config.
prefix="$TMP/prefix"
if make -s install PREFIX="$prefix" BUILD="$BUILD" SAN="$SAN" >"$TMP/install.log" 2>&1; then
    flags=
    [ -n "$SAN" ] && flags="-fsanitize=$SAN"
    if PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -C examples/embed -B CFLAGS="$flags" LDFLAGS="$flags" \
        embed >"$TMP/embed.log" 2>&1; then
        # no LD_LIBRARY_PATH: tfvm.pc's rpath finds the installed libtfvm.so.0
        out=$(examples/embed/embed "$TMP/fib.tfvm" 20 2>&1)
        [ "$out" = "fib(20) = 10946" ] || no "embed printed '$out'"
        out=$(examples/embed/embed examples/fib.tfg 20 2>&1) # tfvm_program_load_file takes .tfg
        [ "$out" = "fib(20) = 10946" ] || no "embed on fib.tfg printed '$out'"
        out=$(TFVM_DEVICE=cuda TFVM_CUDA_LIB=/nonexistent examples/embed/embed "$TMP/fib.tfvm" 20 2>&1)
        [ "$out" = "embed: cuda: unavailable: cannot load /nonexistent: cannot open shared object file: No such file or directory" ] ||
            no "embed without a GPU printed '$out'"
        rm -f examples/embed/embed
    else
        no "examples/embed does not build: $(cat "$TMP/embed.log")"
    fi
else
    no "make install failed: $(cat "$TMP/install.log")"
fi

# The co-execution example (issue 16), built the same way against the same
# install: a training loop whose host feeds batches and a stop flag while the
# graph runs, and fetches each loss. Exact output on 1 and 2 worker threads
# (--threads and TFVM_THREADS): the f32 products' sums are in one order at
# any thread count (docs/devices.md, "Kernel notes"); its other stops and
# its errors. Built in the form docs/coexec.md gives, PKG_CONFIG_PATH on
# make's command line (embed above takes it from the environment): GNU make
# 4.3 did not pass that form to $(shell pkg-config ...).
if [ -f "$prefix/lib/pkgconfig/tfvm.pc" ]; then
    flags=
    [ -n "$SAN" ] && flags="-fsanitize=$SAN"
    if env -u PKG_CONFIG_PATH make -s -C examples/coexec -B PKG_CONFIG_PATH="$prefix/lib/pkgconfig" CFLAGS="$flags" \
        LDFLAGS="$flags" coexec >"$TMP/coexec.log" 2>&1; then
        coexec=examples/coexec/coexec
        expect="step 1: loss 4.531191
step 2: loss 1.779918
step 3: loss 0.847482
step 4: loss 0.354934
step 5: loss 0.168558
step 6: loss 0.073168
step 7: loss 0.036387
step 8: loss 0.014790
step 9: loss 0.007280
step 10: loss 0.003884
step 11: loss 0.001867
step 12: loss 0.000977
stop after step 12: loss below 0.001
w:        0.494 -1.243  1.985  0.741 -0.495  1.488 -1.986  0.249
w true:   0.500 -1.250  2.000  0.750 -0.500  1.500 -2.000  0.250"
        # the expected text but for a last digit: the products' sums run in
        # another order on another instruction set (AVX2's 8 lanes, AVX-512's
        # 16); at another thread count, never (the same text, exactly)
        near() {
            A=$1 B=$2 awk 'function num(s) { return s ~ /^-?[0-9.]+$/ }
                BEGIN { n = split(ENVIRON["A"], a, /[ \n]+/); if (n != split(ENVIRON["B"], b, /[ \n]+/)) exit 1
                    for (i = 1; i <= n; i++)
                        if (a[i] != b[i] && (!num(a[i]) || !num(b[i]) || (a[i] - b[i]) ^ 2 > 4e-12)) exit 1 }'
        }
        first=$("$coexec" examples/coexec/train.tfg --threads 1 2>&1)
        near "$first" "$expect" || no "coexec --threads 1 printed '$first'"
        for t in 1 2; do
            out=$("$coexec" examples/coexec/train.tfg --threads $t 2>&1)
            [ "$out" = "$first" ] || no "coexec --threads $t printed '$out', not what --threads 1 printed"
            out=$(TFVM_THREADS=$t "$coexec" examples/coexec/train.tfg 2>&1)
            [ "$out" = "$first" ] || no "coexec with TFVM_THREADS=$t printed '$out', not what --threads 1 printed"
        done
        out=$("$coexec" examples/coexec/train.tfg 3 --threads 2 2>&1 | sed -n 4p)
        [ "$out" = "stop after step 3: 3 steps" ] || no "coexec for at most 3 steps printed '$out'"
        # a learning rate 8 times too large: the loss grows, and the host stops it
        sed 's/2.0f32 \* lr/16.0f32 * lr/' examples/coexec/train.tfg >"$TMP/diverge.tfg"
        out=$("$coexec" "$TMP/diverge.tfg" --threads 2 2>&1 | sed -n 5p)
        [ "$out" = "stop after step 4: no better loss than 4.531191 for 3 steps" ] ||
            no "coexec on a diverging graph printed '$out'"
        out=$("$coexec" "$TMP/nope.tfg" 2>&1)
        [ "$out" = "coexec: $TMP/nope.tfg: No such file or directory" ] || no "coexec without its graph printed '$out'"
        out=$("$coexec" test/e2e/feed_loop.tfg 2>&1)
        [ "$out" = "coexec: argument 1 'n' of entry 'main': expected i32, got f32" ] ||
            no "coexec on another graph printed '$out'"
        out=$(TFVM_THREADS=0 "$coexec" examples/coexec/train.tfg 2>&1)
        [ "$out" = "coexec: TFVM_THREADS=0: expected an integer from 1 to 1024" ] ||
            no "coexec with TFVM_THREADS=0 printed '$out'"
        "$coexec" >/dev/null 2>"$TMP/coexec.err"
        rc=$?
        { [ $rc = 2 ] && grep -q "^usage: $coexec GRAPH \[MAX_STEPS\] \[--threads N\]$" "$TMP/coexec.err"; } ||
            no "coexec without arguments: exit $rc, '$(cat "$TMP/coexec.err")'"
        rm -f "$coexec"
    else
        no "examples/coexec does not build: $(cat "$TMP/coexec.log")"
    fi
fi
# `tfvm check` ends each convolution's and pool's line with the CPU
# backend's plan (docs/check.md): one of each kind, on 2 threads, exactly as
# expected but for the instruction set and its vector length, the machine's.
# Where the batch is `?` (examples/cnn.tfg) the plan says nothing of it.
isa() { sed -E 's/AVX-512|AVX2|portable/ISA/g; s/channel blocks of [0-9]+/channel blocks of VL/g'; }
got=$("$TFVM" check --threads 2 test/e2e/check/convs.tfg | isa)
want=$(cat test/e2e/check/convs.expected)
# the 3x3 stride-2 max pool kernel is AVX-512's and AVX2's; elsewhere the depthwise kernel takes that pool
grep -qw avx512f /proc/cpuinfo 2>/dev/null || { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; } 2>/dev/null ||
    want=$(echo "$want" | sed 's/^\(pool3 .* cpu: \)3x3 max windows at stride 2, ISA/\1depthwise max, channel blocks of VL, ISA/')
[ "$got" = "$want" ] || no "tfvm check convs.tfg: $(diff <(echo "$got") <(echo "$want"))"
got=$("$TFVM" check --threads 2 examples/cnn.tfg | grep -E '^(c2|p2) ' | isa)
[ "$got" = "c2                       FUSED_CONV2D   f32[?, 16, 14, 14]  cpu: Winograd F(2x2, 3x3), ISA
p2                       MAXPOOL        f32[?, 16, 7, 7]  cpu: 2x2 windows at stride 2, ISA" ] ||
    no "tfvm check examples/cnn.tfg: '$got'"
# the opcode column is as wide as the listing's longest opcode (FUSED_CONV2D_ADD): every line's
# shape starts in column 43
got=$("$TFVM" check --threads 1 test/e2e/check/residual.tfg)
cols=$(echo "$got" | awk '{ print index($0, $3) }' | sort -u)
echo "$got" | grep -q ' FUSED_CONV2D_ADD f32\[1, 4, 8, 8\]  cpu: ' && [ "$cols" = 43 ] ||
    no "tfvm check residual.tfg: columns $cols: '$got'"

exit $status
