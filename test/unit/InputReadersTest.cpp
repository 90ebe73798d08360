//===- InputReadersTest.cpp - untrusted input readers ---------------------===//
//
// The readers of what users hand to spmd: JSON (plans, manifests) with its
// depth and duplicate-key checks, the MLIR text guard, .npy files and
// bundle manifests. Each damaged input must give an error naming the
// reason, never a crash, an allocation of what a header claims, or a
// silently accepted field.
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "spmd/Runtime/Runtime.h"
#include "spmd/Support/JSON.h"
#include "spmd/Support/MLIRSource.h"

#include "gtest/gtest.h"

#include <string>

using namespace spmd;

namespace {

/// The message of `e` (which must be an error).
template <typename T> std::string errorOf(llvm::Expected<T> e) {
  EXPECT_FALSE(bool(e));
  return e ? "" : llvm::toString(e.takeError());
}
std::string errorOf(llvm::Error e) {
  EXPECT_TRUE(bool(e));
  return llvm::toString(std::move(e));
}

/// A .npy file (format 1.0) with `header` as its dict and `payload` bytes.
std::string npy(const std::string &header, const std::string &payload) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h + payload;
}

TEST(JSON, ParsesWellFormedInput) {
  auto value = parseJSON(R"({"a": [1, {"b": "\"}"}], "c": {}})");
  ASSERT_TRUE(bool(value)) << llvm::toString(value.takeError());
  EXPECT_EQ(value->getAsObject()->size(), 2u);
}

TEST(JSON, RejectsDuplicateKeys) {
  EXPECT_EQ(errorOf(parseJSON("{\"a\": 1,\n \"a\": 2}")),
            "line 2, column 2: duplicate key 'a'");
  // Escapes are decoded before keys are compared.
  EXPECT_NE(errorOf(parseJSON(R"({"a": 1, "\u0061": 2})")).find("duplicate"),
            std::string::npos);
  // The same key in two objects is fine.
  EXPECT_TRUE(bool(parseJSON(R"({"x": {"a": 1}, "y": {"a": 2}})")));
}

TEST(JSON, RejectsDeepNestingWithoutRecursing) {
  std::string deep(1000000, '[');
  EXPECT_EQ(errorOf(parseJSON(deep)), "line 1, column 65: nested deeper "
                                      "than 64 levels");
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(bool(parseJSON(ok)));
  // Brackets inside strings do not count.
  EXPECT_TRUE(bool(parseJSON("[\"" + std::string(1000, '[') + "\"]")));
}

TEST(JSON, PassesMalformedInputToTheParser) {
  EXPECT_FALSE(errorOf(parseJSON("{\"a\": ")).empty());
  EXPECT_FALSE(errorOf(parseJSON("\"unterminated")).empty());
  EXPECT_FALSE(errorOf(parseJSON("}}]]")).empty());
}

TEST(MLIRSource, RefusesWhatTheParserCrashesOn) {
  EXPECT_EQ(errorOf(checkMLIRSource(std::string(300, '('))),
            "line 1, column 257: nested deeper than 256 levels");
  EXPECT_NE(errorOf(checkMLIRSource("x = array<  index: 1>"))
                .find("dense arrays of index"),
            std::string::npos);
  // Arrows, strings and comments do not count as nesting.
  std::string arrows;
  for (int i = 0; i < 1000; ++i)
    arrows += "(a) -> (b) \"((((\" // <<<<\n";
  EXPECT_FALSE(bool(checkMLIRSource(arrows)));
  EXPECT_FALSE(bool(checkMLIRSource("x = array<i64: 1, 2>")));
}

TEST(Npy, ReadsAWellFormedFile) {
  std::string payload(24, '\0');
  auto array = run::parseNpy(
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
          payload),
      "a.npy");
  ASSERT_TRUE(bool(array)) << llvm::toString(array.takeError());
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(array->dtype, SPMD_F32);
}

TEST(Npy, ChecksTheByteCountWithoutOverflow) {
  // 2^62 x 2^62 x 4 bytes wraps to 0 in 64-bit arithmetic.
  EXPECT_EQ(errorOf(run::parseNpy(
                npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                    "(4611686018427387904, 4611686018427387904), }",
                    ""),
                "a.npy")),
            "a.npy: shape (4611686018427387904, 4611686018427387904) holds "
            "more than 2^63 bytes");
  EXPECT_NE(
      errorOf(run::parseNpy(npy("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (2, 3), }",
                                std::string(20, '\0')),
                            "a.npy"))
          .find("holds 20 data bytes, its header announces 24"),
      std::string::npos);
}

TEST(Npy, RejectsMalformedHeaders) {
  for (const char *header :
       {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2x,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (", "{}", ""})
    EXPECT_FALSE(
        errorOf(run::parseNpy(npy(header, "12345678"), "a.npy")).empty())
        << header;
  EXPECT_NE(errorOf(run::parseNpy("\x93NUMPY\x09", "a.npy")).find("not a .npy"),
            std::string::npos);
  std::string v9 = npy("{}", "");
  v9[6] = 9;
  EXPECT_NE(errorOf(run::parseNpy(v9, "a.npy")).find("version 9"),
            std::string::npos);
}

/// A manifest of one float32 argument of shape [5, 3] with `patch` spliced
/// into the entry (or replacing it).
std::string manifest(const std::string &entry, const std::string &top = "") {
  return "{" + top + "\"args\": [" + entry + "], \"results\": []}";
}
const char *goodEntry = R"({"index": 0, "fqn": "x", "dtype": "float32",
  "shape": [5, 3], "file": "args/x.npy"})";

TEST(Manifest, ReadsAWellFormedManifest) {
  auto m = run::parseManifest(manifest(goodEntry, "\"seed\": 7, "), "m.json");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ(m->seed, 7u);
  EXPECT_EQ(m->args[0].shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(m->args[0].dtype, SPMD_F32);
  EXPECT_EQ(m->args[0].noise, 0.0);
  std::string noisy = goodEntry;
  noisy.insert(noisy.find("\"dtype\""), "\"noise\": 2.5e-6, ");
  auto n = run::parseManifest(manifest(noisy), "m.json");
  ASSERT_TRUE(bool(n)) << llvm::toString(n.takeError());
  EXPECT_EQ(n->args[0].noise, 2.5e-6);
}

TEST(Manifest, ChecksEveryField) {
  struct Case {
    std::string text, error;
  };
  std::string entry = goodEntry;
  auto with = [&](const std::string &from, const std::string &to) {
    std::string e = entry;
    e.replace(e.find(from), from.size(), to);
    return manifest(e);
  };
  for (const Case &c : std::vector<Case>{
           {manifest(goodEntry, "\"seed\": \"abc\", "),
            "'seed' must be a non-negative integer"},
           {manifest(goodEntry, "\"seed\": -1, "),
            "'seed' must be a non-negative integer"},
           {with("\"index\": 0", "\"index\": 3"), "has index 3"},
           {with("\"float32\"", "\"float8\""), "unknown dtype 'float8'"},
           {with("[5, 3]", "[5, -3]"), "'shape' must list non-negative"},
           {with("[5, 3]", "[5, \"3\"]"), "'shape' must list non-negative"},
           {with("[5, 3]", "\"5x3\""), "lacks index, fqn, dtype or shape"},
           {with("\"x\"", "\"\""), "has an empty fqn"},
           {with("args/x.npy", "../x.npy"), "is not a relative path inside"},
           {with("args/x.npy", "/etc/passwd"), "is not a relative path"},
           {with("args/x.npy", "a/../../x.npy"), "is not a relative path"},
           {with("\"dtype\"", "\"noise\": -1e-7, \"dtype\""),
            "'noise' must be a finite non-negative number"},
           {with("\"dtype\"", "\"noise\": \"small\", \"dtype\""),
            "'noise' must be a finite non-negative number"},
           {manifest("1"), "args[0]: must be an object"},
           {manifest(goodEntry, "\"optimizer\": [], "),
            "'optimizer' must be an object"},
           {manifest(goodEntry, "\"optimizer\": {\"betas\": [0.9]}, "),
            "'optimizer.betas' must be two numbers"},
           {manifest(goodEntry, "\"random_ops\": {\"a\": \"x\"}, "),
            "'random_ops.a' must be a count"},
           {"{\"args\": [], \"args\": [], \"results\": []}",
            "duplicate key 'args'"},
           {"[]", "not a JSON object"},
       }) {
    std::string error = errorOf(run::parseManifest(c.text, "m.json"));
    EXPECT_NE(error.find(c.error), std::string::npos)
        << c.text << "\n  gave: " << error;
    EXPECT_EQ(error.rfind("m.json: ", 0), 0u) << error;
  }
}

TEST(Manifest, ChecksUpdatesAgainstTheArguments) {
  std::string result = R"({"index": 0, "fqn": "x", "dtype": "float32",
    "shape": [5, 3], "updates": 1})";
  std::string text = "{\"args\": [" + std::string(goodEntry) +
                     "], \"results\": [" + result + "]}";
  EXPECT_NE(errorOf(run::parseManifest(text, "m.json"))
                .find("'updates' must be null or the index of an argument"),
            std::string::npos);
}

} // namespace
