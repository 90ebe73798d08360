//===- JSON.cpp - JSON input with limits ----------------------------------===//

#include "spmd/Support/JSON.h"
#include "spmd/Support/TextPosition.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

using namespace llvm;

namespace {

/// One open array or object of the scan.
struct Frame {
  bool object;
  bool expectKey; // objects: the next string is a key
  StringSet<> keys;
};

} // namespace

Expected<json::Value> spmd::parseJSON(StringRef text, unsigned maxDepth) {
  SmallVector<Frame, 8> stack;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"')
        end += text[end] == '\\' ? 2 : 1;
      if (end >= text.size())
        break; // unterminated: json::parse reports it
      if (!stack.empty() && stack.back().object && stack.back().expectKey) {
        // The key as JSON decodes it: a one-string document cannot nest.
        Expected<json::Value> key = json::parse(text.slice(i, end + 1));
        if (!key) {
          consumeError(key.takeError());
          break;
        }
        StringRef name = *key->getAsString();
        if (!stack.back().keys.insert(name).second)
          return createStringError(spmd::textPosition(text, i) +
                                   "duplicate key '" + name + "'");
        stack.back().expectKey = false;
      }
      i = end;
      continue;
    }
    if (c == '{' || c == '[') {
      if (stack.size() >= maxDepth)
        return createStringError(spmd::textPosition(text, i) +
                                 "nested deeper than " + Twine(maxDepth) +
                                 " levels");
      stack.push_back(Frame{c == '{', c == '{', {}});
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    } else if (c == ',' && !stack.empty() && stack.back().object) {
      stack.back().expectKey = true;
    }
  }
  return json::parse(text);
}
