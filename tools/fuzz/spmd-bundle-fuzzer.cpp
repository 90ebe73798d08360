//===- spmd-bundle-fuzzer.cpp - manifest.json and .npy readers ------------===//
//
// The input is read both as a bundle's manifest.json (parseManifest: every
// field checked) and as a .npy file (parseNpy: header checked before the
// data is used); an array that parses is also cut into the piece each rank
// of a 2x2 mesh holds under [Shard(0), StridedShard(0, 2)] (or Replicate
// for a 0-d array) and put back, as spmd-run does. Seeds: a captured
// manifest and .npy files of every dtype (tools/fuzz/make_corpus.py).
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace spmd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  llvm::Expected<run::Manifest> manifest =
      run::parseManifest(bytes, "manifest.json");
  if (!manifest)
    llvm::consumeError(manifest.takeError());
  llvm::Expected<run::Array> array = run::parseNpy(bytes, "input.npy");
  if (!array) {
    llvm::consumeError(array.takeError());
    return 0;
  }
  std::vector<int64_t> mesh = {2, 2};
  std::vector<layout::Placement> placements(2, layout::Placement::replicate());
  if (!array->shape.empty()) {
    placements[0] = layout::Placement::shard(0);
    placements[1] = layout::Placement::stridedShard(0, 2);
  }
  if (!layout::validate(array->shape, mesh, placements).empty())
    return 0;
  std::vector<int64_t> local =
      layout::maxLocalShape(array->shape, mesh, placements);
  run::Array whole = *array;
  std::fill(whole.data.begin(), whole.data.end(), 0);
  for (int64_t r = 0; r < 4; ++r) {
    auto maps = run::localIndexMaps(array->shape, mesh, placements,
                                    layout::rankToCoords(r, mesh));
    run::insertPiece(whole, run::extractPiece(*array, maps, local), maps);
  }
  if (whole.data != array->data)
    abort(); // the pieces must tile the array
  return 0;
}
