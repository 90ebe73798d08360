//===- JSON.h - JSON input with limits --------------------------*- C++ -*-===//
//
// JSON that users hand to spmd (TP plans, bundle manifests) is parsed here,
// never with llvm::json::parse alone: that parser recurses once per nesting
// level (a file nested tens of thousands of levels deep overflows the stack)
// and keeps the last of two equal keys of one object without a word.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_SUPPORT_JSON_H
#define SPMD_SUPPORT_JSON_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace spmd {

/// The deepest nesting of arrays and objects parseJSON() accepts. A TP plan
/// nests 3 levels, a manifest 3; 64 leaves room and keeps the recursion of
/// llvm::json::parse a few kilobytes of stack.
constexpr unsigned kMaxJSONDepth = 64;

/// Parses `text` (RFC 8259 JSON, UTF-8) into a value. Before handing the text
/// to llvm::json::parse it checks, without recursion, that arrays and objects
/// nest at most `maxDepth` levels and that no object repeats a key (keys are
/// compared after unescaping, so "a" and "\u0061" are the same key).
/// Errors: "line L, column C: nested deeper than N levels",
/// "line L, column C: duplicate key 'K'", or llvm::json::parse's own message
/// (which names line and column) for malformed JSON.
llvm::Expected<llvm::json::Value> parseJSON(llvm::StringRef text,
                                            unsigned maxDepth = kMaxJSONDepth);

} // namespace spmd

#endif // SPMD_SUPPORT_JSON_H
