# shellcheck shell=bash
# bench/onnx_venv.sh — sourced by bench/onnx.sh and bench/tf.sh: the venv the
# peer rows run in (build/bench-venv, or $BENCH_VENV), made on first use with
# PyPI's packages; later runs work offline because nothing is installed twice.

BENCH_VENV=${BENCH_VENV:-build/bench-venv}

# bench_venv WHAT MODULES -- PACKAGES: succeeds when the venv's python imports
# MODULES, installing PACKAGES first if it does not; else prints one line
# saying why WHAT is skipped and fails.
bench_venv() {
    local what=$1 mods=() pkgs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do mods+=("$1"); shift; done
    shift
    pkgs=("$@")
    local py=$BENCH_VENV/bin/python imports
    imports=$(IFS=,; echo "${mods[*]}")
    if [ ! -x "$py" ]; then
        python3 -m venv "$BENCH_VENV" >/dev/null 2>&1 ||
            { echo "bench: $what skipped: python3 -m venv $BENCH_VENV failed (is python3-venv installed?)"; return 1; }
    fi
    "$py" -c "import $imports" >/dev/null 2>&1 && return 0
    local log
    log=$BENCH_VENV/pip-$(echo "${pkgs[*]}" | tr ' ' '-').log
    # one line, whether it works or not
    printf 'bench: installing %s into %s (once; log: %s) ... ' "${pkgs[*]}" "$BENCH_VENV" "$log"
    if ! "$py" -m pip install -q "${pkgs[@]}" >"$log" 2>&1 || ! "$py" -c "import $imports" >/dev/null 2>&1; then
        echo "failed: $what skipped ($(grep -m1 -E 'ERROR|rror' "$log" || echo "see the log"))"
        return 1
    fi
    echo "done"
}
