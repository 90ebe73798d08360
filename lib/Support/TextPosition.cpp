//===- TextPosition.cpp - positions in input text -------------------------===//

#include "spmd/Support/TextPosition.h"

#include "llvm/ADT/Twine.h"

std::string spmd::textPosition(llvm::StringRef text, size_t offset) {
  llvm::StringRef before = text.take_front(offset);
  size_t line = before.count('\n') + 1;
  size_t lineStart = before.rfind('\n');
  size_t column =
      offset - (lineStart == llvm::StringRef::npos ? 0 : lineStart + 1);
  return ("line " + llvm::Twine(line) + ", column " + llvm::Twine(column + 1) +
          ": ")
      .str();
}
