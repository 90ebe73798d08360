//===- MLIRSource.cpp - Checks on MLIR text before parsing ----------------===//

#include "spmd/Support/MLIRSource.h"
#include "spmd/Support/TextPosition.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <array>

using namespace llvm;

Error spmd::checkMLIRSource(StringRef text, unsigned maxDepth) {
  // The characters the scan acts on; the rest (most of a captured step's
  // megabytes) are skipped in a tight loop.
  static const std::array<bool, 256> acts = [] {
    std::array<bool, 256> table{};
    for (unsigned char c : StringRef("\"/([{<)]}>"))
      table[c] = true;
    return table;
  }();
  unsigned depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    while (i < text.size() && !acts[static_cast<unsigned char>(text[i])])
      ++i;
    if (i == text.size())
      break;
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        i += text[i] == '\\';
      continue;
    }
    if (c == '/' && text.substr(i, 2) == "//") {
      i = text.find('\n', i);
      if (i == StringRef::npos)
        break;
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > maxDepth)
        return createStringError(spmd::textPosition(text, i) +
                                 "nested deeper than " + Twine(maxDepth) +
                                 " levels");
      if (c == '<' && text.take_front(i).ends_with("array") &&
          text.drop_front(i + 1).ltrim().starts_with("index"))
        return createStringError(
            spmd::textPosition(text, i) +
            "dense arrays of index elements are not supported (MLIR's "
            "parser crashes on them); use i64");
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return Error::success();
}
