//===- Bundle.h - spmd-capture bundles and .npy files -----------*- C++ -*-===//
//
// The bundle spmd-capture writes (docs/capture.md): manifest.json and one
// NumPy .npy file per argument and per reference result; and the mapping of
// a global array to the local piece one rank holds under a layout.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_TOOLS_SPMD_RUN_BUNDLE_H
#define SPMD_TOOLS_SPMD_RUN_BUNDLE_H

#include "spmd/Layout/LayoutMath.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::run {

/// A dense row-major array: `dtype` is the runtime's SpmdDType code.
struct Array {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numel() const;
  size_t elementSize() const;
  /// Element `i` converted to double.
  double at(int64_t i) const;
};

/// Reads a NumPy .npy file (format 1.0-3.0, little-endian, C order) of
/// float32/float64/int64/int32/bool. Errors name the file and the reason.
llvm::Expected<Array> readNpy(const std::string &path);
/// As readNpy, on the bytes of a file; errors begin with `name`. The header
/// is checked before any data is used: format version 1-3, a known dtype, C
/// order, non-negative dims whose byte count is computed with overflow
/// checks and must equal the payload's.
llvm::Expected<Array> parseNpy(llvm::StringRef bytes, llvm::StringRef name);
/// Writes `array` as a .npy file (format 1.0).
llvm::Error writeNpy(const std::string &path, const Array &array);

/// The SpmdDType code of a PyTorch dtype name as the manifest writes it
/// ("float32", "bfloat16", "int64", ...); an error names unknown ones.
llvm::Expected<int32_t> dtypeFromName(llvm::StringRef name);
/// The PyTorch name of an SpmdDType code ("unknown" for none).
const char *dtypeName(int32_t dtype);

/// One manifest entry (an argument or a result of @train_step).
struct Entry {
  int64_t index = 0;
  std::string fqn, role;
  int32_t dtype = 0;    // SpmdDType code of the manifest's dtype name
  std::string file;     // empty for results of a --no-reference bundle
  std::string fileFp64; // results: the float64 reference, if recorded
  std::vector<int64_t> shape;
  int64_t updates = -1; // results: the argument it updates, or -1
  /// Results: the fp32 rounding noise spmd-capture measured, in the
  /// result's units (the largest distance from the float64 step among
  /// PyTorch's fp32 step and its randomly rounded draws); 0 if not recorded.
  double noise = 0;
};

/// The optimizer spmd-capture recorded (manifest "optimizer").
struct OptimizerInfo {
  std::string name; // "sgd", "adam" or empty when not recorded
  double lr = 0, eps = 0, beta1 = 0, beta2 = 0;
};

struct Manifest {
  std::vector<Entry> args, results;
  std::vector<std::string> randomOps; // "aten.bernoulli.p x4"
  uint64_t seed = 0;
  OptimizerInfo optimizer;
};

/// Parses DIR/manifest.json and checks every field it reads (the bundle
/// format, docs/capture.md): JSON nested at most kMaxJSONDepth levels with no
/// repeated key, `seed` a non-negative integer, each entry's `index` its
/// position, `fqn` non-empty, `dtype` a known name, `shape` non-negative
/// integers, `updates` null or an argument index, `file`/`file_fp64`
/// relative paths inside DIR, `noise` a finite non-negative number. Errors name
/// the file, the entry and the field. Agreement with the .npy files and the
/// module is the caller's to check.
llvm::Expected<Manifest> readManifest(const std::string &dir);
/// As readManifest, on the text of a manifest; errors begin with `name`.
llvm::Expected<Manifest> parseManifest(llvm::StringRef text,
                                       llvm::StringRef name);

/// Per tensor dim, the global index of each local position of the piece the
/// rank at `coords` holds (from layout::localIndexRanges).
std::vector<std::vector<int64_t>>
localIndexMaps(const std::vector<int64_t> &globalShape,
               const std::vector<int64_t> &meshShape,
               const std::vector<layout::Placement> &placements,
               const std::vector<int64_t> &coords);

/// Copies the elements of `global` selected by `maps` into a local array of
/// shape `localShape` (>= the map sizes per dim: the rest is zero padding).
Array extractPiece(const Array &global,
                   const std::vector<std::vector<int64_t>> &maps,
                   const std::vector<int64_t> &localShape);

/// Writes the valid region (the map sizes) of `piece` back into `global`.
void insertPiece(Array &global, const Array &piece,
                 const std::vector<std::vector<int64_t>> &maps);

/// Adds the valid region of `piece` into `global` (one summand of a
/// Partial(sum) value: float32, float64, int64 or int32; fatal for another
/// dtype).
void addPiece(Array &global, const Array &piece,
              const std::vector<std::vector<int64_t>> &maps);

} // namespace spmd::run

#endif // SPMD_TOOLS_SPMD_RUN_BUNDLE_H
