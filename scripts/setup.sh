#!/usr/bin/env bash
# Installs every system dependency of spmd from Debian's packages.
# Idempotent: does nothing when all packages are already installed.
#   scripts/setup.sh               what the build and the test suite need
#   scripts/setup.sh --sanitizers  also clang-22 and its sanitizer and
#                                  libFuzzer runtimes (scripts/sanitize.sh,
#                                  scripts/fuzz.sh)
set -euo pipefail

PACKAGES=(
  # Build
  cmake ninja-build ccache g++ git
  # MLIR/LLVM 22 (libMLIR.so, TableGen, lit, FileCheck)
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # Unit tests; libFuzzer for the fuzz targets' bounded runs
  libgtest-dev libfuzzer-22-dev
  # CPU runtime: collectives + launcher, GEMM
  libopenmpi-dev openmpi-bin libopenblas-dev
  # Capture and reference results (Debian's system Python)
  python3-torch python3-numpy
)

if [ "${1:-}" = "--sanitizers" ]; then
  PACKAGES+=(clang-22 libclang-rt-22-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "spmd setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
