#!/usr/bin/env bash
# python/tests/run.sh PYTHON VENV BUILD [install] — `make pytest`: builds the
# tfvm Python package into the venv VENV (made with PYTHON -m venv; numpy,
# pytest and setuptools from PyPI, onnxruntime too when PyPI has it for this
# Python) and runs its pytest suite (not with `install`: bench/python.sh).
# Without venv or PyPI the suite is skipped, saying so (exit 0; 2 with
# `install`); a build or test failure fails.
set -uo pipefail
py=${1:-python3}; venv=${2:-build/py-venv}; build=${3:-build}; only=${4:-}
cd "$(dirname "$0")/../.."
skip() { echo "make pytest: SKIPPED: $*"; if [ -n "$only" ]; then exit 2; fi; exit 0; }
# the package's own make of libtfvm.a must not join the caller's jobserver
unset MAKEFLAGS MFLAGS MAKELEVEL
# SAN (make asan): BUILD's libtfvm.a is instrumented, so the extension is built
# with the same flags and Python runs with the sanitizers' runtimes preloaded
# (those of CC); leaks are not checked, as CPython does not free everything at exit
san=${SAN:-}
preload=
if [ -n "$san" ]; then
    IFS=, read -r -a sans <<<"$san"
    for s in "${sans[@]}"; do
        case $s in address) lib=libasan.so;; undefined) lib=libubsan.so;; *) skip "no Python suite under SAN=$s";; esac
        path=$("${CC:-cc}" -print-file-name=$lib)
        [ -f "$path" ] || skip "SAN=$san: ${CC:-cc} has no $lib to preload into Python"
        preload=${preload:+$preload:}$path
    done
    export CFLAGS="-fsanitize=$san -fno-omit-frame-pointer" LDFLAGS="-fsanitize=$san"
fi
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >/dev/null 2>&1 || { rm -rf "$venv"; skip "'$py -m venv' failed (install python3-venv: .ci/deps.sh)"; }
fi
vpy=$venv/bin/python
if ! "$vpy" -c 'import numpy, pytest, setuptools, sys; from setuptools.command import bdist_wheel; sys.exit(0)' 2>/dev/null; then
    "$vpy" -m pip install -q --disable-pip-version-check numpy pytest "setuptools>=70.1" ||
        skip "pip could not install numpy, pytest and setuptools from PyPI into $venv"
fi
# onnxruntime, for the parity tests: tried once (its tests skip, saying so, without it)
if [ -z "$san" ] && [ ! -e "$venv/.ort-tried" ]; then
    "$vpy" -m pip install -q --disable-pip-version-check onnxruntime >/dev/null 2>&1 ||
        echo "make pytest: onnxruntime not installed (PyPI has none for this Python?): its parity tests will skip"
    touch "$venv/.ort-tried"
fi
TFVM_BUILD=$build "$vpy" -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./python ||
    { echo "make pytest: building the tfvm package failed"; exit 1; }
[ -z "$only" ] || exit 0
# from the tests' directory, so that `import tfvm` is the installed package, not python/tfvm
# the host stand-in for the CUDA backend, for test_tfvm.py's device test
[ ! -f "$build/test/libtfvm_fakecuda.so" ] || export TFVM_TEST_FAKE_CUDA=$PWD/$build/test/libtfvm_fakecuda.so
cd python/tests || exit 1
[ -z "$san" ] || echo "make pytest: under SAN=$san (preloading $preload; onnxruntime left out)"
if [ -n "$preload" ]; then
    export LD_PRELOAD=$preload${LD_PRELOAD:+:$LD_PRELOAD}
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
exec "../../$vpy" -m pytest -q -rs -p no:cacheprovider .
