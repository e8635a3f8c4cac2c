#!/usr/bin/env bash
# test/e2e/run.sh — end-to-end tests of the tfvm command. Program files carry
# their own expectations, one per line (Wren style):
#   ; expect: ARGS -> OUTPUT           stdout (lines joined by ' | ') and exit 0
#   ; expect error: ARGS -> MESSAGE    stderr is exactly "tfvm: MESSAGE", exit != 0
# ARGS may be empty ("; expect:  -> 42"). .tfg programs write the same lines
# as // comments, and test/compile/*.tfg also carry
#   // expect compile error: MESSAGE  the first line of stderr is "tfvm: MESSAGE",
#                                     then the quoted source line and a caret line
# Run from the repository root:
#   TFVM=build/bin/tfvm bash test/e2e/run.sh
set -u
TFVM=${TFVM:-build/bin/tfvm}
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# check_expectations FILE RUNFILE [COMMENT]: runs every expectation line of FILE
# against RUNFILE; COMMENT is what starts a comment line (";" or "//").
check_expectations() {
    local src=$1 file=$2 c=${3:-;} line args want got rc
    while IFS= read -r line; do
        case "$line" in
        "$c expect error:"*)
            line=${line#"$c expect error:"}
            args=${line%% -> *}
            want=${line#* -> }
            # shellcheck disable=SC2086
            got=$("$TFVM" run "$file" $args 2>&1 >/dev/null)
            rc=$?
            if [ $rc -ne 0 ] && [ "$got" = "tfvm: $want" ]; then ok; else
                bad "$src ($file) args '$args': want error 'tfvm: $want', got rc=$rc '$got'"
            fi
            ;;
        "$c expect:"*)
            line=${line#"$c expect:"}
            args=${line%% -> *}
            want=${line#* -> }
            # shellcheck disable=SC2086
            got=$("$TFVM" run "$file" $args 2>"$TMP/err" | paste -sd'|' | sed 's/|/ | /g')
            rc=${PIPESTATUS[0]}
            if [ "$rc" -eq 0 ] && [ "$got" = "$want" ]; then ok; else
                bad "$src ($file) args '$args': want '$want', got rc=$rc '$got' $(head -c 300 "$TMP/err")"
            fi
            ;;
        esac
    done <"$src"
}

# 1. Examples and test programs: run as text, as assembled bytecode, and
#    check that dis | asm gives back the same bytes.
for src in examples/asm/*.tfasm test/e2e/*.tfasm; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .tfasm)
    check_expectations "$src" "$src"
    if "$TFVM" asm "$src" -o "$TMP/$name.tfvm" 2>"$TMP/err"; then
        ok
        check_expectations "$src" "$TMP/$name.tfvm"
        if "$TFVM" dis "$TMP/$name.tfvm" | "$TFVM" asm - -o "$TMP/$name.2.tfvm" &&
            cmp -s "$TMP/$name.tfvm" "$TMP/$name.2.tfvm"; then ok; else
            bad "$src: tfvm dis | tfvm asm does not give back the same bytes"
        fi
    else
        grep -q '^; expect' "$src" && bad "$src: does not assemble: $(cat "$TMP/err")"
    fi
done

# 1b. Graph-language programs: run from source, compiled to bytecode (with and
#     without optimization), and compile --emit=asm | asm gives the same bytes.
for src in examples/*.tfg test/compile/*.tfg test/e2e/*.tfg test/gpu/*.tfg; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .tfg)
    want=$(sed -n 's|^// expect compile error: ||p' "$src")
    if [ -n "$want" ]; then
        "$TFVM" compile "$src" -o "$TMP/$name.tfvm" 2>"$TMP/err"
        rc=$?
        if [ $rc -eq 1 ] && [ "$(head -1 "$TMP/err")" = "tfvm: $want" ] && [ "$(wc -l <"$TMP/err")" -eq 3 ] &&
            tail -1 "$TMP/err" | grep -q '\^$'; then ok; else
            bad "$src: want compile error 'tfvm: $want' (+ quote and caret), got rc=$rc '$(cat "$TMP/err")'"
        fi
        continue
    fi
    check_expectations "$src" "$src" //
    for opt in -O1 -O0; do
        if "$TFVM" compile $opt "$src" -o "$TMP/$name$opt.tfvm" 2>"$TMP/err"; then
            ok
            check_expectations "$src" "$TMP/$name$opt.tfvm" //
            if "$TFVM" compile $opt --emit=asm "$src" | "$TFVM" asm - -o "$TMP/$name$opt.2.tfvm" &&
                cmp -s "$TMP/$name$opt.tfvm" "$TMP/$name$opt.2.tfvm"; then ok; else
                bad "$src: tfvm compile $opt --emit=asm | tfvm asm does not give back the same bytes"
            fi
        else
            bad "$src: does not compile ($opt): $(cat "$TMP/err")"
        fi
    done
done

# 1c. The same expectations again with tensor work placed on the GPU, through
#     the host stand-in for the CUDA backend (docs/devices.md): placement and
#     copies must change neither a result nor an error message.
if [ -n "${FAKE_CUDA:-}" ] && [ -f "$FAKE_CUDA" ]; then
    export TFVM_CUDA_LIB=$FAKE_CUDA TFVM_DEVICE=cuda
    for src in examples/asm/*.tfasm test/e2e/*.tfasm; do
        [ -e "$src" ] && check_expectations "$src" "$src"
    done
    for src in examples/*.tfg; do
        [ -e "$src" ] && check_expectations "$src" "$src" //
    done
    unset TFVM_CUDA_LIB TFVM_DEVICE
fi

# 2. The bad-input corpus: every file fails with its exact one-line message.
if [ -f test/bad/EXPECTED ]; then
    while IFS=$'\t' read -r f want; do
        [ -n "$f" ] || continue
        got=$("$TFVM" run "test/bad/$f" 2>&1 >/dev/null)
        rc=$?
        if [ $rc -eq 1 ] && [ "$got" = "tfvm: $want" ]; then ok; else
            bad "test/bad/$f: want rc=1 'tfvm: $want', got rc=$rc '$got'"
        fi
    done <test/bad/EXPECTED
fi

# 3. Command-line behaviour: cases are "args<TAB>exit status<TAB>stderr<TAB>stdout",
#    where "-" accepts anything and "<empty>" means nothing was printed.
while IFS=$'\t' read -r args want_rc want_err want_out; do
    case "$args" in "#"* | "") continue ;; esac
    # shellcheck disable=SC2086
    out=$("$TFVM" $args 2>"$TMP/err")
    rc=$?
    err=$(cat "$TMP/err")
    [ "$want_err" = "<empty>" ] && want_err=
    [ "$want_out" = "<empty>" ] && want_out=
    if [ "$rc" != "$want_rc" ]; then
        bad "tfvm $args: exit $rc, want $want_rc (stderr: $err)"
    elif [ "$want_err" != "-" ] && [ "$err" != "$want_err" ]; then
        bad "tfvm $args: stderr '$err', want '$want_err'"
    elif [ "$want_out" != "-" ] && [ "$(printf '%s' "$out" | paste -sd'|' | sed 's/|/ | /g')" != "$want_out" ]; then
        bad "tfvm $args: stdout '$out', want '$want_out'"
    else ok; fi
done <test/e2e/cli_cases.tsv

# 4. Every subcommand has a --help that exits 0 and starts with its usage line.
for c in run asm dis compile info devices debug dot profile; do
    if "$TFVM" "$c" --help | head -1 | grep -q "^usage: tfvm $c"; then ok; else bad "tfvm $c --help"; fi
done

# 5. Scripted checks that need more than one command.
bash test/e2e/extra.sh "$TFVM" "$BUILD" "$TMP" && ok || bad "test/e2e/extra.sh"

# Models exported with dynamic axes (issue 25).
bash test/e2e/dyn.sh "$TFVM" "$TMP" && ok || bad "test/e2e/dyn.sh"
bash test/e2e/t5.sh "$TFVM" "$TMP" && ok || bad "test/e2e/t5.sh"

# 6. tfvm profile: the --trace timeline (Trace Event Format), --json, columns.
bash test/e2e/profile.sh "$TFVM" "$TMP" && ok || bad "test/e2e/profile.sh"

# 7. The example models (examples/{mlp,cnn,rnn,treernn}.tfg) against NumPy.
bash test/e2e/models.sh "$TFVM" "$TMP" && ok || bad "test/e2e/models.sh"

echo "e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
