//===- Bundle.cpp - spmd-capture bundles and .npy files -------------------===//

#include "Bundle.h"

#include "spmd/Runtime/Runtime.h"
#include "spmd/Support/JSON.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>

using namespace spmd::run;
using llvm::createStringError;

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

size_t Array::elementSize() const { return spmd_rt_dtype_size(dtype); }

double Array::at(int64_t i) const {
  const char *p = data.data() + i * elementSize();
  switch (dtype) {
  case SPMD_F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case SPMD_F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case SPMD_I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<double>(v);
  }
  case SPMD_I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case SPMD_I1:
    return *p ? 1.0 : 0.0;
  }
  return 0.0;
}

namespace {
struct NpyType {
  const char *descr;
  int32_t dtype;
};
const NpyType npyTypes[] = {{"<f4", SPMD_F32},
                            {"<f8", SPMD_F64},
                            {"<i8", SPMD_I64},
                            {"<i4", SPMD_I32},
                            {"|b1", SPMD_I1}};

/// The value of `'key': value` in a .npy header dict (Python literal).
llvm::StringRef headerField(llvm::StringRef header, llvm::StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == llvm::StringRef::npos)
    return {};
  llvm::StringRef rest = header.drop_front(at + key.size() + 2).ltrim(" :");
  size_t end = rest.starts_with("(") ? rest.find(')') + 1 : rest.find(',');
  return rest.take_front(end).trim();
}
} // namespace

llvm::Expected<Array> spmd::run::readNpy(const std::string &path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!file)
    return createStringError("%s: %s", path.c_str(),
                             file.getError().message().c_str());
  return parseNpy((*file)->getBuffer(), path);
}

llvm::Expected<Array> spmd::run::parseNpy(llvm::StringRef bytes,
                                          llvm::StringRef name) {
  auto fail = [&](const llvm::Twine &why) {
    return createStringError("%s: %s", name.str().c_str(), why.str().c_str());
  };
  if (!bytes.starts_with("\x93NUMPY") || bytes.size() < 10)
    return fail("not a .npy file");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    return fail("unsupported .npy format version " + llvm::Twine(major));
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) |
                static_cast<unsigned char>(bytes[9]) << 8;
    headerStart = 10;
  } else {
    if (bytes.size() < 12)
      return fail("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i]))
                   << (8 * i);
    headerStart = 12;
  }
  if (bytes.size() < headerStart + headerLen)
    return fail("truncated header");
  llvm::StringRef header = bytes.substr(headerStart, headerLen);
  Array array;
  llvm::StringRef descr = headerField(header, "descr").trim("'\"");
  const NpyType *type = nullptr;
  for (const NpyType &t : npyTypes)
    if (descr == t.descr || (descr == "<b1" && t.dtype == SPMD_I1))
      type = &t;
  if (!type)
    return fail("unsupported dtype '" + descr + "'");
  array.dtype = type->dtype;
  if (headerField(header, "fortran_order") != "False")
    return fail("Fortran-order arrays are not supported");
  llvm::StringRef shape = headerField(header, "shape").trim("()");
  llvm::SmallVector<llvm::StringRef> dims;
  shape.split(dims, ',', -1, /*KeepEmpty=*/false);
  // The byte count is computed with overflow checks: a header may announce
  // any shape, and a wrapped product would pass the size check below.
  std::optional<int64_t> size = static_cast<int64_t>(array.elementSize());
  for (llvm::StringRef d : dims) {
    int64_t v;
    if (d.trim().getAsInteger(10, v) || v < 0)
      return fail("malformed shape '" + shape + "'");
    array.shape.push_back(v);
    if (size)
      size = llvm::checkedMul(*size, v);
  }
  if (!size)
    return fail("shape (" + shape + ") holds more than 2^63 bytes");
  llvm::StringRef payload = bytes.drop_front(headerStart + headerLen);
  if (static_cast<int64_t>(payload.size()) != *size)
    return fail("holds " + llvm::Twine(payload.size()) + " data bytes, its " +
                "header announces " + llvm::Twine(*size));
  array.data.assign(payload.begin(), payload.end());
  return array;
}

llvm::Error spmd::run::writeNpy(const std::string &path, const Array &array) {
  const char *descr = nullptr;
  for (const NpyType &t : npyTypes)
    if (t.dtype == array.dtype)
      descr = t.descr;
  if (!descr)
    return createStringError("%s: dtype %d has no .npy type", path.c_str(),
                             array.dtype);
  std::string shape;
  for (int64_t d : array.shape)
    shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1)
    shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return createStringError("%s: %s", path.c_str(), ec.message().c_str());
  os << "\x93NUMPY" << char(1) << char(0) << char(header.size() & 0xff)
     << char(header.size() >> 8) << header;
  os.write(array.data.data(), array.data.size());
  return llvm::Error::success();
}

namespace {
/// PyTorch's dtype names (str(torch.float32)[6:]) as the manifest writes
/// them; bf16 values are stored widened to float32 (.npy has no bf16).
struct TorchType {
  const char *name;
  int32_t dtype;
};
const TorchType torchTypes[] = {{"float32", SPMD_F32},   {"float64", SPMD_F64},
                                {"bfloat16", SPMD_BF16}, {"int64", SPMD_I64},
                                {"int32", SPMD_I32},     {"bool", SPMD_I1}};
} // namespace

llvm::Expected<int32_t> spmd::run::dtypeFromName(llvm::StringRef name) {
  for (const TorchType &t : torchTypes)
    if (name == t.name)
      return t.dtype;
  return createStringError(
      "unknown dtype '%s' (float32, float64, bfloat16, int64, int32, bool)",
      name.str().c_str());
}

const char *spmd::run::dtypeName(int32_t dtype) {
  for (const TorchType &t : torchTypes)
    if (dtype == t.dtype)
      return t.name;
  return "unknown";
}

namespace {
/// A bundle file name: relative, inside the bundle (no "..", no root).
bool isInsideBundle(llvm::StringRef file) {
  if (file.empty() || llvm::sys::path::is_absolute(file) ||
      llvm::sys::path::has_root_name(file))
    return false;
  for (auto it = llvm::sys::path::begin(file), e = llvm::sys::path::end(file);
       it != e; ++it)
    if (*it == "..")
      return false;
  return true;
}
} // namespace

llvm::Expected<Manifest> spmd::run::readManifest(const std::string &dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "manifest.json");
  auto fail = [&](const llvm::Twine &why) {
    return createStringError("%s: %s", path.c_str(), why.str().c_str());
  };
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file)
    return fail(file.getError().message());
  return parseManifest((*file)->getBuffer(), path);
}

llvm::Expected<Manifest> spmd::run::parseManifest(llvm::StringRef text,
                                                  llvm::StringRef name) {
  auto fail = [&](const llvm::Twine &why) {
    return createStringError("%s: %s", name.str().c_str(), why.str().c_str());
  };
  llvm::Expected<llvm::json::Value> json = parseJSON(text);
  if (!json)
    return fail(llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("not a JSON object");
  Manifest manifest;
  if (const llvm::json::Value *seed = root->get("seed")) {
    std::optional<int64_t> value = seed->getAsInteger();
    if (!value || *value < 0)
      return fail("'seed' must be a non-negative integer");
    manifest.seed = static_cast<uint64_t>(*value);
  }
  if (const llvm::json::Value *optValue = root->get("optimizer")) {
    const llvm::json::Object *opt = optValue->getAsObject();
    if (!opt)
      return fail("'optimizer' must be an object");
    auto number = [&](llvm::StringRef key, double &out) -> bool {
      const llvm::json::Value *v = opt->get(key);
      if (!v)
        return true;
      std::optional<double> d = v->getAsNumber();
      if (!d || !std::isfinite(*d) || *d < 0)
        return false;
      out = *d;
      return true;
    };
    if (const llvm::json::Value *name = opt->get("name")) {
      if (!name->getAsString())
        return fail("'optimizer.name' must be a string");
      manifest.optimizer.name = name->getAsString()->str();
    }
    if (!number("lr", manifest.optimizer.lr) ||
        !number("eps", manifest.optimizer.eps))
      return fail("'optimizer' lr and eps must be non-negative numbers");
    if (const llvm::json::Value *betasValue = opt->get("betas")) {
      const llvm::json::Array *betas = betasValue->getAsArray();
      std::optional<double> b1, b2;
      if (betas && betas->size() == 2) {
        b1 = (*betas)[0].getAsNumber();
        b2 = (*betas)[1].getAsNumber();
      }
      if (!b1 || !b2 || *b1 < 0 || *b1 >= 1 || *b2 < 0 || *b2 >= 1)
        return fail("'optimizer.betas' must be two numbers in [0, 1)");
      manifest.optimizer.beta1 = *b1;
      manifest.optimizer.beta2 = *b2;
    }
  }
  if (const llvm::json::Value *randomValue = root->get("random_ops")) {
    const llvm::json::Object *random = randomValue->getAsObject();
    if (!random)
      return fail("'random_ops' must be an object of counts");
    for (const auto &kv : *random) {
      std::optional<int64_t> count = kv.second.getAsInteger();
      if (!count || *count < 0)
        return fail("'random_ops." + kv.first.str() + "' must be a count");
      manifest.randomOps.push_back(kv.first.str() + " x" +
                                   std::to_string(*count));
    }
  }
  for (auto [key, list] : {std::make_pair("args", &manifest.args),
                           std::make_pair("results", &manifest.results)}) {
    const llvm::json::Array *entries = root->getArray(key);
    if (!entries)
      return fail(llvm::Twine("no '") + key + "' list");
    for (const llvm::json::Value &value : *entries) {
      std::string at =
          (llvm::Twine(key) + "[" + llvm::Twine(list->size()) + "]").str();
      auto bad = [&](const llvm::Twine &why) { return fail(at + ": " + why); };
      const llvm::json::Object *e = value.getAsObject();
      if (!e)
        return bad("must be an object");
      Entry entry;
      auto index = e->getInteger("index");
      auto fqn = e->getString("fqn");
      auto file = e->getString("file");
      auto dtype = e->getString("dtype");
      const llvm::json::Array *shape = e->getArray("shape");
      // Results have no file in a bundle captured with --no-reference,
      // arguments none in one captured with --meta (shapes only).
      if (!index || !fqn || !dtype || !shape)
        return bad("lacks index, fqn, dtype or shape");
      if (*index != static_cast<int64_t>(list->size()))
        return bad("has index " + llvm::Twine(*index) +
                   ": entries are listed in order, index = position");
      if (fqn->empty())
        return bad("has an empty fqn");
      llvm::Expected<int32_t> code = dtypeFromName(*dtype);
      if (!code)
        return bad(llvm::toString(code.takeError()));
      entry.index = *index;
      entry.fqn = fqn->str();
      entry.file = file ? file->str() : "";
      entry.dtype = *code;
      if (const llvm::json::Value *role = e->get("role")) {
        if (!role->getAsString())
          return bad("'role' must be a string");
        entry.role = role->getAsString()->str();
      }
      if (const llvm::json::Value *fp64 = e->get("file_fp64")) {
        if (!fp64->getAsString())
          return bad("'file_fp64' must be a string");
        entry.fileFp64 = fp64->getAsString()->str();
      }
      if (const llvm::json::Value *noise = e->get("noise")) {
        std::optional<double> n = noise->getAsNumber();
        if (!n || !std::isfinite(*n) || *n < 0)
          return bad("'noise' must be a finite non-negative number");
        entry.noise = *n;
      }
      if (const llvm::json::Value *updates = e->get("updates")) {
        if (updates->kind() != llvm::json::Value::Null) {
          std::optional<int64_t> target = updates->getAsInteger();
          if (!target || *target < 0 ||
              *target >= static_cast<int64_t>(manifest.args.size()))
            return bad("'updates' must be null or the index of an argument");
          entry.updates = *target;
        }
      }
      for (const std::string *name : {&entry.file, &entry.fileFp64})
        if (!name->empty() && !isInsideBundle(*name))
          return bad("file '" + *name +
                     "' is not a relative path inside the bundle");
      for (const llvm::json::Value &d : *shape) {
        std::optional<int64_t> size = d.getAsInteger();
        if (!size || *size < 0)
          return bad("'shape' must list non-negative integers");
        entry.shape.push_back(*size);
      }
      list->push_back(std::move(entry));
    }
  }
  return manifest;
}

std::vector<std::vector<int64_t>>
spmd::run::localIndexMaps(const std::vector<int64_t> &globalShape,
                          const std::vector<int64_t> &meshShape,
                          const std::vector<layout::Placement> &placements,
                          const std::vector<int64_t> &coords) {
  std::vector<std::vector<int64_t>> maps(globalShape.size());
  auto ranges =
      layout::localIndexRanges(globalShape, meshShape, placements, coords);
  for (size_t d = 0; d < ranges.size(); ++d)
    for (const layout::Interval &interval : ranges[d])
      for (int64_t i = interval.begin; i < interval.end; ++i)
        maps[d].push_back(i);
  return maps;
}

namespace {
/// Calls f(localOffset, globalOffset) for every element of the valid region.
template <typename F>
void forEachMapped(const std::vector<int64_t> &globalShape,
                   const std::vector<int64_t> &localShape,
                   const std::vector<std::vector<int64_t>> &maps, F f) {
  size_t rank = maps.size();
  for (const auto &m : maps)
    if (m.empty())
      return;
  std::vector<int64_t> gStride(rank, 1), lStride(rank, 1), idx(rank, 0);
  for (size_t d = rank; d-- > 1;) {
    gStride[d - 1] = gStride[d] * globalShape[d];
    lStride[d - 1] = lStride[d] * localShape[d];
  }
  while (true) {
    int64_t l = 0, g = 0;
    for (size_t d = 0; d < rank; ++d) {
      l += idx[d] * lStride[d];
      g += maps[d][idx[d]] * gStride[d];
    }
    f(l, g);
    size_t d = rank;
    while (d > 0 && ++idx[d - 1] == static_cast<int64_t>(maps[d - 1].size()))
      idx[--d] = 0;
    if (d == 0)
      return;
  }
}
} // namespace

Array spmd::run::extractPiece(const Array &global,
                              const std::vector<std::vector<int64_t>> &maps,
                              const std::vector<int64_t> &localShape) {
  Array piece;
  piece.dtype = global.dtype;
  piece.shape = localShape;
  size_t es = global.elementSize();
  piece.data.assign(piece.numel() * es, 0);
  forEachMapped(global.shape, localShape, maps, [&](int64_t l, int64_t g) {
    std::memcpy(piece.data.data() + l * es, global.data.data() + g * es, es);
  });
  return piece;
}

void spmd::run::insertPiece(Array &global, const Array &piece,
                            const std::vector<std::vector<int64_t>> &maps) {
  size_t es = global.elementSize();
  forEachMapped(global.shape, piece.shape, maps, [&](int64_t l, int64_t g) {
    std::memcpy(global.data.data() + g * es, piece.data.data() + l * es, es);
  });
}

template <typename T>
static void addMapped(Array &global, const Array &piece,
                      const std::vector<std::vector<int64_t>> &maps) {
  forEachMapped(global.shape, piece.shape, maps, [&](int64_t l, int64_t g) {
    T sum, add;
    std::memcpy(&sum, global.data.data() + g * sizeof(T), sizeof(T));
    std::memcpy(&add, piece.data.data() + l * sizeof(T), sizeof(T));
    sum += add;
    std::memcpy(global.data.data() + g * sizeof(T), &sum, sizeof(T));
  });
}

void spmd::run::addPiece(Array &global, const Array &piece,
                         const std::vector<std::vector<int64_t>> &maps) {
  switch (global.dtype) {
  case SPMD_F32:
    return addMapped<float>(global, piece, maps);
  case SPMD_F64:
    return addMapped<double>(global, piece, maps);
  case SPMD_I64:
    return addMapped<int64_t>(global, piece, maps);
  case SPMD_I32:
    return addMapped<int32_t>(global, piece, maps);
  default:
    spmd_rt_fatal("a Partial(sum) value of dtype %s cannot be summed",
                  dtypeName(global.dtype));
  }
}
