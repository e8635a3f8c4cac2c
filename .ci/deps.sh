#!/usr/bin/env bash
# .ci/deps.sh — installs the Debian packages tfvm needs to build and test
# (only those missing). Run as root, or with sudo available.
set -euo pipefail
pkgs=(build-essential clang pkg-config check libhwloc-dev libopenblas-dev libedit-dev tmux graphviz
      protobuf-c-compiler libprotobuf-c-dev libonnx-dev)
# make pytest builds the Python package (python/) in a venv: python3 needs its
# venv module and C headers (Debian splits them off; pyenv's python3 has both)
if ! python3 -c 'import venv, ensurepip' 2>/dev/null ||
   [ ! -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)/Python.h" ]; then
    pkgs+=(python3-venv python3-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
