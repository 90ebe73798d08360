#!/usr/bin/env bash
# Installs every dependency of spmd: the system packages from Debian, and the
# project's Python environment, a venv with torch, numpy and transformers
# from PyPI (python/requirements.txt) that spmd-capture, the reference
# results, the tests and the benchmarks run in, and in which `import spmd`
# finds this checkout's Python API.
# Idempotent: does nothing when everything is already there.
#   scripts/setup.sh               what the build and the test suite need
#   scripts/setup.sh --sanitizers  also clang-22 and its sanitizer and
#                                  libFuzzer runtimes (scripts/sanitize.sh,
#                                  scripts/fuzz.sh)
# The Python environment is $SPMD_PYTHON_ENV, by default <repo>/.venv (git
# ignores it); CMake takes its interpreter from the same place (SPMD_PYTHON).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PACKAGES=(
  # Build
  cmake ninja-build ccache g++ git
  # MLIR/LLVM 22 (libMLIR.so, TableGen, lit, FileCheck)
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # Unit tests; libFuzzer for the fuzz targets' bounded runs
  libgtest-dev libfuzzer-22-dev
  # CPU runtime: collectives + launcher, GEMM
  libopenmpi-dev openmpi-bin libopenblas-dev
  # The base of the project's Python environment (venv with ensurepip)
  python3 python3-venv
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

if [ ${#missing[@]} -ne 0 ]; then
  echo "spmd setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The venv is made from Debian's interpreter, never the first python3 on
# PATH. pip with --no-index checks the requirements against what is
# installed, without the network: when they hold there is nothing to do.
env_dir="${SPMD_PYTHON_ENV:-$root/.venv}"
python="$env_dir/bin/python"
requirements="$root/python/requirements.txt"
if ! { [ -x "$python" ] &&
        "$python" -m pip install -q --no-index -r "$requirements" >/dev/null 2>&1; }; then
  echo "spmd setup: installing $(grep -v '^#' "$requirements" | xargs) from PyPI into $env_dir"
  /usr/bin/python3 -m venv "$env_dir"
  "$python" -m pip install -q --upgrade pip
  "$python" -m pip install -q --upgrade -r "$requirements"
fi
# `import spmd` (the Python API, python/spmd) in the environment: a .pth
# file naming this checkout's python/, as an editable install does. The
# package finds the build in <repo>/build (or $SPMD_BUILD_DIR).
site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ "$(cat "$site/spmd.pth" 2>/dev/null)" != "$root/python" ]; then
  echo "$root/python" > "$site/spmd.pth"
fi
