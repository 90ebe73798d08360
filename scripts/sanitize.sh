#!/usr/bin/env bash
# The AddressSanitizer + UndefinedBehaviorSanitizer build: configures
# build-sanitize/ with clang-22, -DSPMD_SANITIZE=address,undefined and
# -DSPMD_FUZZ=ON (the same build holds the coverage-guided fuzz targets of
# scripts/fuzz.sh), builds it and runs the whole test suite (check-spmd) in
# it. Any sanitizer report fails the test that triggered it.
#   scripts/sanitize.sh [ninja targets...]   (default: check-spmd)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/setup.sh --sanitizers

build="${SPMD_SANITIZE_BUILD:-build-sanitize}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLLVM_ENABLE_ASSERTIONS=ON \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DSPMD_SANITIZE=address,undefined -DSPMD_FUZZ=ON -DSPMD_ENABLE_CUDA=OFF
fi
# LLVM's and MLIR's libraries are not instrumented, but the allocators they
# share with spmd's code are inlined from headers that poison memory in an
# ASan build: user poisoning is off, or every MLIR string would be a
# use-after-poison. LeakSanitizer is on (the default): MPI's own
# allocations are kept from it (runtime/lib/Collectives.cpp,
# spmd/Runtime/MpiLeakCheck.h, test/sanitizer-suppressions.txt); the rest
# halts.
export ASAN_OPTIONS="halt_on_error=1:detect_odr_violation=0:allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/test/sanitizer-suppressions.txt:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ninja -C "$build" -j"${SPMD_JOBS:-$(nproc)}" "${@:-check-spmd}"
