//===- TextPosition.h - positions in input text -----------------*- C++ -*-===//

#ifndef SPMD_SUPPORT_TEXTPOSITION_H
#define SPMD_SUPPORT_TEXTPOSITION_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace spmd {

/// "line L, column C: " for byte `offset` of `text`, both 1-based, as the
/// input checks (parseJSON, checkMLIRSource) begin their errors.
std::string textPosition(llvm::StringRef text, size_t offset);

} // namespace spmd

#endif // SPMD_SUPPORT_TEXTPOSITION_H
