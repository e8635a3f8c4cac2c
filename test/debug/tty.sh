#!/usr/bin/env bash
# test/debug/tty.sh TMPDIR — drives `tfvm debug` in a real terminal (a tmux
# pane on a private server): line editing (Ctrl-A, Backspace), history (Up),
# Tab completion (commands, channels after `feed` and `queues`, variables
# after `display` and `info`), Ctrl-C
# stopping a long `continue` back at the prompt, Ctrl-C at the prompt leaving
# the session alive, and a clean exit (status 0, which under ASan also means
# no leak).
set -u
TMP=$1
TFVM=${TFVM:?}
SOCK=$TMP/tmux.sock
tm() { tmux -S "$SOCK" "$@"; }
trap 'tm kill-server 2>/dev/null' EXIT
status=0
no() { echo "FAIL (debug tty): $*"; status=1; }
screen() { tm capture-pane -p -t "${PANE:-dbg}" -S -200; } # PANE: the session shown
# wait_for TEXT [SECONDS]: until the pane shows TEXT (fixed string)
wait_for() {
    local i
    for ((i = 0; i < ${2:-10} * 20; i++)); do
        screen | grep -qF -- "$1" && return 0
        sleep 0.05
    done
    no "waited for '$1'; the screen:"
    screen | grep -v '^$' | tail -15
    return 1
}
count() { screen | grep -cF -- "$1"; }
# wait_count TEXT N: until TEXT shows on N lines
wait_count() {
    local i
    for ((i = 0; i < 200; i++)); do
        [ "$(count "$1")" -ge "$2" ] && return 0
        sleep 0.05
    done
    no "waited for $2 lines with '$1'; the screen:"
    screen | grep -v '^$' | tail -15
    return 1
}

# 2e9 iterations: minutes of work, so the `continue` below is still running
# when Ctrl-C comes.
# The pane's bash writes tfvm's exit status to a file: tmux's own record of
# it (pane_dead_status) was sometimes never filled in under ASan. bash
# catches SIGINT with a trap (a caught signal is reset in the child, where
# an ignored one would stay ignored), so Ctrl-C reaches tfvm alone in effect.
rm -f "$TMP/tty_status"
tm new-session -d -s dbg -x 150 -y 60 \
    "bash -c 'trap : INT; \"\$0\" debug examples/sum_loop.tfg 2000000000; echo \$? > \"\$1\"' '$TFVM' '$TMP/tty_status'" \; \
    set-option -t dbg remain-on-exit on || { no "tmux new-session"; exit 1; }
wait_for "(tfvm)" || exit 1  # (capture-pane drops trailing blanks)

# Line editing: type "quit", Ctrl-A to the start, insert "help ", a typo fixed
# with Backspace: runs "help quit".
tm send-keys -t dbg 'quit' C-a 'helpx' BSpace ' ' Enter
wait_for "usage: quit" || exit 1
# History: Up brings "help quit" back.
tm send-keys -t dbg Up Enter
wait_count "usage: quit" 2 || exit 1
# Completion: "conti" + Tab completes to "continue ".
tm send-keys -t dbg 'conti' Tab Enter
wait_for "Starting main(2000000000)" || exit 1
sleep 1
screen | grep -q "Run finished" && no "the long run finished before Ctrl-C"
tm send-keys -t dbg C-c
wait_for "Interrupted. Next: " || exit 1
tm send-keys -t dbg 'where' Enter
wait_for "iteration" || exit 1
wait_for "#2  [] entry main" || exit 1
# Ctrl-C at the prompt: a fresh prompt, the session goes on.
prompts=$(count "(tfvm)")
tm send-keys -t dbg C-c
wait_count "(tfvm)" $((prompts + 1)) || exit 1
tm send-keys -t dbg 'help step' Enter
wait_for "usage: step [N]" || exit 1
# step after the interrupt continues from where it stopped
tm send-keys -t dbg 'step 10' Enter
wait_for "(NEXTITER)" || exit 1
tm send-keys -t dbg 'quit' Enter
# the exit status (128 + N after signal N), once tfvm has exited
for ((i = 0; i < 400; i++)); do
    [ -s "$TMP/tty_status" ] && break
    sleep 0.05
done
got=$(cat "$TMP/tty_status" 2>/dev/null)
[ "$got" = "0" ] || { no "after quit tfvm's exit status is '$got' (want 0)"; screen | grep -v '^$' | tail -20; }

# Completion of the channel commands: "fe" + Tab is "feed ", Tab again the
# one FEED channel "x "; "queues s" + Tab is "queues sum ".
tm kill-session -t dbg
tm new-session -d -s dbg -x 150 -y 60 "$TFVM debug test/debug/feed_loop.tfasm 2 --feed x=1,2" \; \
    set-option -t dbg remain-on-exit on || { no "tmux new-session (feed)"; exit 1; }
wait_for "(tfvm)" || exit 1
tm send-keys -t dbg 'restart' Enter
wait_for "Next: c0 (CONST)" || exit 1
tm send-keys -t dbg 'fe' Tab Tab '9' Enter
wait_for "feed x (i32): 3 queued [1, 2, 9], 0 taken" || exit 1
tm send-keys -t dbg 'queues s' Tab Enter
wait_for "fetch sum: none made" || exit 1
tm send-keys -t dbg 'quit' Enter

# Completion of source variables: "info l" + Tab is "info locals ";
# "disp" + Tab, "i" + Tab is "display i " (variables only: no instruction
# named i...). A second session is made before the first is killed (the
# server ends with its last session).
tm new-session -d -s vars -x 150 -y 60 "$TFVM debug test/debug/vars.tfg 3" \; \
    set-option -t vars remain-on-exit on || { no "tmux new-session (vars)"; exit 1; }
tm kill-session -t dbg
PANE=vars
wait_for "(tfvm)" || exit 1
tm send-keys -t vars 'break sq' Enter 'run' Enter
wait_for "Breakpoint 1, sq_0_x" || exit 1
tm send-keys -t vars 'info l' Tab Enter
wait_for "d = <no value yet>" || exit 1
tm send-keys -t vars 'disp' Tab 'i' Tab Enter
wait_for "1: i = 0" || exit 1
tm send-keys -t vars 'quit' Enter
[ $status -eq 0 ] && echo "debug: terminal test passed (editing, history, completion, Ctrl-C)"
exit $status
