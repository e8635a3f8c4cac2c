#!/usr/bin/env bash
# .ci/deps.sh — installs the Debian packages tfvm needs to build and test
# (only those missing). Run as root, or with sudo available.
set -euo pipefail
pkgs=(build-essential clang pkg-config check libhwloc-dev libopenblas-dev libedit-dev tmux graphviz
      protobuf-c-compiler libprotobuf-c-dev libonnx-dev)
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
