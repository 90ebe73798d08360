#!/usr/bin/env bash
# The whole test suite: builds spmd and runs check-spmd (lit/FileCheck tests
# and the GoogleTest unit tests, through lit). Ends with lit's summary.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/build.sh check-spmd
