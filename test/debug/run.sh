#!/usr/bin/env bash
# test/debug/run.sh — tests of `tfvm debug` and `tfvm dot`, run by `make test`:
#   1. scripted sessions: each test/debug/NAME.cmds (its first line says
#      "# args: FILE ARG...") is fed to `tfvm debug` on stdin and the whole
#      transcript must equal test/debug/NAME.out byte for byte;
#   2. command-line errors of both commands;
#   3. `tfvm dot` on every example renders with Graphviz (`dot -Tsvg`), --svg
#      works, and the text for examples/asm/fib.tfasm equals fib_asm.dot;
#   4. the REPL in a real terminal (tmux): line editing, history, completion,
#      Ctrl-C stopping a long `continue` and Ctrl-C at the prompt (tty.sh).
# Run from the repository root:  TFVM=build/bin/tfvm bash test/debug/run.sh
# After an intended change of output:  TFVM_UPDATE_GOLDEN=1 bash test/debug/run.sh
set -u
TFVM=${TFVM:-build/bin/tfvm}
case "$TFVM" in /*) ;; *) TFVM=$PWD/$TFVM ;; esac
export TFVM
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL (debug): $*"; }

# 1. Golden transcripts.
for cmds in test/debug/*.cmds; do
    name=$(basename "$cmds" .cmds)
    # shellcheck disable=SC2046
    args=$(sed -n 's/^# args: //p' "$cmds" | head -1)
    # shellcheck disable=SC2086
    "$TFVM" debug $args <"$cmds" >"$TMP/$name.out" 2>&1
    rc=$?
    if [ "${TFVM_UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$TMP/$name.out" "test/debug/$name.out"
        echo "debug: wrote test/debug/$name.out"
    fi
    if [ $rc -ne 0 ]; then
        bad "$cmds: tfvm debug $args exited $rc: $(tail -3 "$TMP/$name.out")"
    elif cmp -s "$TMP/$name.out" "test/debug/$name.out"; then
        ok
    else
        bad "$cmds: transcript differs from test/debug/$name.out (TFVM_UPDATE_GOLDEN=1 rewrites it):"
        diff -u "test/debug/$name.out" "$TMP/$name.out" | head -40
    fi
done

# 2. Command-line behaviour: "args<TAB>exit status<TAB>first line of stderr".
while IFS=$'\t' read -r args want_rc want_err; do
    case "$args" in "#"* | "") continue ;; esac
    # shellcheck disable=SC2086
    "$TFVM" $args </dev/null >"$TMP/cli.out" 2>"$TMP/cli.err"
    rc=$?
    err=$(head -1 "$TMP/cli.err")
    if [ "$rc" = "$want_rc" ] && [ "$err" = "$want_err" ]; then ok; else
        bad "tfvm $args: exit $rc stderr '$err', want exit $want_rc stderr '$want_err'"
    fi
done <<'CASES'
debug	2	tfvm: missing FILE (see 'tfvm debug --help')
debug --bogus examples/fib.tfg 1	2	tfvm: unknown option '--bogus' (see 'tfvm debug --help')
debug examples/fib.tfg	2	tfvm: main(n: i32) takes 1 argument, got 0
debug examples/fib.tfg x	1	tfvm: argument 1 'n': expected i32, got 'x'
debug no/such.tfvm	1	tfvm: no/such.tfvm: No such file or directory
debug -e nope examples/asm/fib.tfasm 1	1	tfvm: examples/asm/fib.tfasm: no entry point named 'nope'
debug examples/fib.tfg 3	0	
debug test/debug/feed_loop.tfasm 2 --feed x=1,a	2	tfvm: --feed x: expected i32, got 'a'
debug test/debug/feed_loop.tfasm 2 --feed sum=1	2	tfvm: --feed sum: the program has no FEED channel 'sum' (its FEED channels: 'x')
debug test/debug/feed_loop.tfasm 2 --feed x	2	tfvm: --feed expects NAME=V1,V2,..., got 'x' (see 'tfvm debug --help')
debug examples/fib.tfg 3 --feed x=1	2	tfvm: --feed x: the program has no FEED channel 'x' (its FEED channels: none)
debug test/debug/feed_loop.tfasm 2 --feed x=1,2	0	
debug --help	0	
dot	2	tfvm: missing FILE (see 'tfvm dot --help')
dot --bogus examples/fib.tfg	2	tfvm: unknown option '--bogus' (see 'tfvm dot --help')
dot examples/fib.tfg examples/gcd.tfg	2	tfvm: more than one input file ('examples/fib.tfg' and 'examples/gcd.tfg') (see 'tfvm dot --help')
dot no/such.tfg	1	tfvm: no/such.tfg: No such file or directory
dot --help	0	
CASES
# a run that ends at the end of input (no quit) still exits 0
out=$("$TFVM" debug examples/fib.tfg 10 <<<"continue" 2>&1)
case "$out" in *"Run finished: r0 = 89") ok ;; *) bad "debug without quit printed '$out'" ;; esac
for c in debug dot; do
    if "$TFVM" "$c" --help | head -1 | grep -q "^usage: tfvm $c"; then ok; else bad "tfvm $c --help"; fi
    if "$TFVM" --help | grep -q "^  $c "; then ok; else bad "tfvm --help does not list $c"; fi
done

# 3. tfvm dot.
"$TFVM" dot examples/asm/fib.tfasm >"$TMP/fib_asm.dot" 2>&1 || bad "tfvm dot examples/asm/fib.tfasm failed"
[ "${TFVM_UPDATE_GOLDEN:-}" = 1 ] && cp "$TMP/fib_asm.dot" test/debug/fib_asm.dot
if cmp -s "$TMP/fib_asm.dot" test/debug/fib_asm.dot; then ok; else
    bad "tfvm dot examples/asm/fib.tfasm differs from test/debug/fib_asm.dot:"
    diff -u test/debug/fib_asm.dot "$TMP/fib_asm.dot" | head -20
fi
out=$(PATH=/nonexistent "$TFVM" dot --svg examples/fib.tfg 2>&1 >/dev/null)
rc=$?
want="tfvm: --svg needs Graphviz's \`dot\` in PATH (install graphviz, or leave out --svg and render the dot text yourself)"
if [ $rc -eq 1 ] && [ "$out" = "$want" ]; then ok; else bad "dot --svg without Graphviz: rc=$rc '$out'"; fi
if command -v dot >/dev/null; then
    for f in examples/*.tfg examples/asm/*.tfasm test/e2e/*.tfasm; do
        if "$TFVM" dot "$f" | dot -Tsvg >"$TMP/g.svg" 2>"$TMP/g.err" && grep -q '<svg' "$TMP/g.svg" &&
            [ ! -s "$TMP/g.err" ]; then ok; else bad "tfvm dot $f | dot -Tsvg: $(head -3 "$TMP/g.err")"; fi
    done
    if "$TFVM" dot --svg examples/fib.tfg -o "$TMP/fib.svg" && grep -q 'fib_2_n' "$TMP/fib.svg" &&
        "$TFVM" dot --svg examples/nested_loops.tfg >"$TMP/nl.svg" && grep -q 'cluster_2' "$TMP/nl.svg"; then ok; else
        bad "tfvm dot --svg"
    fi
    if bash test/debug/dot_html.sh "$TFVM" "$TMP"; then ok; else bad "test/debug/dot_html.sh"; fi
else
    echo "debug: SKIP rendering with Graphviz (dot not installed; .ci/deps.sh installs graphviz)"
fi

# 4. A real terminal.
if command -v tmux >/dev/null; then
    if bash test/debug/tty.sh "$TMP"; then ok; else bad "test/debug/tty.sh"; fi
else
    echo "debug: SKIP the terminal test (tmux not installed; .ci/deps.sh installs it)"
fi

echo "debug: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
