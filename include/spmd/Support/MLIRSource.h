//===- MLIRSource.h - Checks on MLIR text before parsing --------*- C++ -*-===//
//
// MLIR 22's parser recurses once per nesting level of types, attributes and
// regions, so a deeply nested input overflows the stack, and it crashes on a
// dense array of `index` elements (`array<index: 1>`; Debian's mlir-opt-22
// does the same). spmd's tools and fuzz targets check their MLIR input here
// first and answer with a located error instead.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_SUPPORT_MLIRSOURCE_H
#define SPMD_SUPPORT_MLIRSOURCE_H

#include "llvm/Support/Error.h"

namespace spmd {

/// The deepest nesting of (), [], {} and <> spmd accepts in MLIR text: a
/// captured training step nests about 10 levels.
constexpr unsigned kMaxMLIRNesting = 256;

/// Scans MLIR text (string literals and `//` comments skipped) for what the
/// MLIR parser cannot take: brackets nested deeper than `maxDepth`, and a
/// dense array attribute of `index` elements. Errors, with 1-based
/// positions: "line L, column C: nested deeper than N levels",
/// "line L, column C: dense arrays of index elements are not supported".
llvm::Error checkMLIRSource(llvm::StringRef text,
                            unsigned maxDepth = kMaxMLIRNesting);

} // namespace spmd

#endif // SPMD_SUPPORT_MLIRSOURCE_H
