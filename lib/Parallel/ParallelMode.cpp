//===- ParallelMode.cpp - mode registry, helpers, --spmd-parallelize ------===//

#include "spmd/Parallel/ParallelMode.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/Passes.h"
#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Passes.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ManagedStatic.h"

#include <mutex>

namespace spmd {
#define GEN_PASS_DEF_PARALLELIZEPASS
#include "spmd/Parallel/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;

ParallelMode::~ParallelMode() = default;

LogicalResult ParallelMode::transformAndCompile(ModuleOp,
                                                const ParallelOptions &) {
  return success();
}

FailureOr<func::FuncOp> spmd::getTrainStep(ModuleOp module) {
  auto fn = module.lookupSymbol<func::FuncOp>("train_step");
  if (!fn || fn.isExternal())
    return module.emitError("a ParallelMode needs a func.func @train_step "
                            "with a body (spmd-capture's output)");
  return fn;
}

StringRef spmd::getArgFqn(func::FuncOp fn, unsigned i) {
  auto fqn = fn.getArgAttrOfType<StringAttr>(i, "spmd.fqn");
  return fqn ? fqn.getValue() : "";
}

StringRef spmd::getArgRole(func::FuncOp fn, unsigned i) {
  auto role = fn.getArgAttrOfType<StringAttr>(i, "spmd.role");
  return role ? role.getValue() : "";
}

FailureOr<ParallelOptions>
spmd::checkModeOptions(ModuleOp module, const ParallelOptions &options,
                       StringRef mode, ArrayRef<std::string> names,
                       ArrayRef<StringRef> known) {
  if (options.meshShape.size() != names.size())
    return module.emitError()
           << mode << " runs on a " << names.size() << "-D mesh ("
           << llvm::join(names, ", ") << "); got a mesh of "
           << options.meshShape.size() << " dims";
  for (auto &entry : options.options)
    if (!llvm::is_contained(known, entry.getKey()))
      return module.emitError()
             << mode << ": unknown option '" << entry.getKey() << "'";
  ParallelOptions checked = options;
  if (checked.meshNames.empty())
    checked.meshNames.assign(names.begin(), names.end());
  return checked;
}

namespace {
struct Registry {
  std::mutex mutex;
  llvm::StringMap<ParallelModeFactory> factories;
};
llvm::ManagedStatic<Registry> registry;
} // namespace

bool spmd::registerParallelMode(StringRef name, ParallelModeFactory factory) {
  std::lock_guard<std::mutex> lock(registry->mutex);
  return registry->factories.try_emplace(name, std::move(factory)).second;
}

std::unique_ptr<ParallelMode> spmd::createParallelMode(StringRef name) {
  std::lock_guard<std::mutex> lock(registry->mutex);
  auto it = registry->factories.find(name);
  return it == registry->factories.end() ? nullptr : it->second();
}

std::vector<std::string> spmd::getParallelModeNames() {
  std::lock_guard<std::mutex> lock(registry->mutex);
  std::vector<std::string> names;
  for (auto &entry : registry->factories)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

FailureOr<std::vector<int64_t>> spmd::parseMeshShape(StringRef text) {
  std::vector<int64_t> shape;
  SmallVector<StringRef> parts;
  text.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t size;
    if (part.trim().getAsInteger(10, size) || size < 1)
      return failure();
    shape.push_back(size);
  }
  return shape;
}

FailureOr<std::vector<layout::Placement>>
spmd::parsePlacements(MLIRContext *ctx, StringRef text, std::string &error) {
  ctx->getOrLoadDialect<SPMDDialect>();
  std::string source = ("#spmd.layout<@mesh, [" + text + "]>").str();
  Attribute attr;
  {
    ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &diag) {
      error = diag.str();
      return success();
    });
    attr = parseAttribute(source, ctx);
  }
  auto layoutAttr = dyn_cast_or_null<LayoutAttr>(attr);
  if (!layoutAttr) {
    if (error.empty())
      error = "expected placements, got '" + text.str() + "'";
    return failure();
  }
  return layoutAttr.getLayoutPlacements();
}

bool spmd::matchFqn(StringRef pattern, StringRef fqn) {
  SmallVector<StringRef> pats, parts;
  pattern.split(pats, '.');
  fqn.split(parts, '.');
  if (pats.size() != parts.size())
    return false;
  // Glob of one component: '*' any run, '?' any one character.
  std::function<bool(StringRef, StringRef)> glob = [&](StringRef p,
                                                       StringRef s) {
    if (p.empty())
      return s.empty();
    if (p.front() == '*')
      return glob(p.drop_front(), s) || (!s.empty() && glob(p, s.drop_front()));
    if (s.empty())
      return false;
    return (p.front() == '?' || p.front() == s.front()) &&
           glob(p.drop_front(), s.drop_front());
  };
  for (auto [p, s] : llvm::zip(pats, parts))
    if (!glob(p, s))
      return false;
  return true;
}

LogicalResult spmd::annotateAndPartition(
    ModuleOp module, const ParallelOptions &options,
    function_ref<std::optional<std::vector<layout::Placement>>(
        StringRef, StringRef, RankedTensorType)>
        layoutOf,
    function_ref<LogicalResult(func::FuncOp)> beforePropagate) {
  FailureOr<func::FuncOp> step = getTrainStep(module);
  if (failed(step))
    return failure();
  func::FuncOp fn = *step;
  if (!module.getOps<MeshOp>().empty())
    return module.emitError("the module already has an spmd.mesh: a "
                            "ParallelMode partitions a single-device step");
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(module.getBody());
  SmallVector<StringRef> names;
  for (const std::string &n : options.meshNames)
    names.push_back(n);
  auto mesh = MeshOp::create(b, module.getLoc(), "mesh", options.meshShape,
                             b.getStrArrayAttr(names));
  if (failed(mesh.verify()))
    return failure();
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());

  // The batch: dim 0 of the first input. Data arguments without it (a
  // causal mask) are shared by every batch shard.
  std::optional<int64_t> batch;
  for (unsigned i = 0; i < fn.getNumArguments() && !batch; ++i)
    if (auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]))
      if (getArgRole(fn, i) == "input" && type.getRank() > 0)
        batch = type.getDimSize(0);
  std::vector<LayoutAttr> argLayouts(fn.getNumArguments());
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
    if (!type || !fn.getArgAttrDict(i))
      continue;
    StringRef fqn = getArgFqn(fn, i), role = getArgRole(fn, i);
    if ((role == "input" || role == "target") &&
        (type.getRank() == 0 || type.getDimSize(0) != batch))
      role = "";
    std::optional<std::vector<layout::Placement>> p = layoutOf(role, fqn, type);
    if (!p)
      continue;
    std::string why = layout::validate(shapeOf(type), options.meshShape, *p);
    if (!why.empty())
      return emitError(fn.getArgument(i).getLoc(), "argument '")
             << (fqn.empty() ? StringRef("?") : fqn)
             << "' cannot take its layout: " << why;
    argLayouts[i] = getLayoutAttr(meshRef, *p);
    fn.setArgAttr(i, "spmd.layout", argLayouts[i]);
  }
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (DictionaryAttr attrs = fn.getResultAttrDict(i))
      if (auto updates = attrs.getAs<IntegerAttr>("spmd.updates"))
        if (updates.getInt() >= 0 &&
            updates.getInt() < static_cast<int64_t>(argLayouts.size()) &&
            argLayouts[updates.getInt()])
          fn.setResultAttr(i, "spmd.layout", argLayouts[updates.getInt()]);
  if (beforePropagate && failed(beforePropagate(fn)))
    return failure();

  OpPassManager pm(ModuleOp::getOperationName());
  PropagatePassOptions propagate;
  auto search = options.options.find("search");
  if (search != options.options.end())
    propagate.search = search->second;
  // Cleanups between the stages: the passes read meaning from attributes,
  // not from locations or op identity, which these may merge or drop.
  auto cleanup = [&] {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  };
  pm.addPass(createPropagatePass(propagate));
  cleanup();
  pm.addPass(createPartitionPass());
  cleanup();
  return options.runPipeline(pm, module);
}

namespace {

/// "k=v;k2=v2" into `out`; fails on an entry without '='.
LogicalResult parseKeyValues(StringRef text,
                             llvm::StringMap<std::string> &out) {
  SmallVector<StringRef> entries;
  text.split(entries, ';', -1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    auto [key, value] = entry.split('=');
    if (key.trim().empty() || value.size() == entry.size())
      return failure();
    out[key.trim()] = value.trim().str();
  }
  return success();
}

struct ParallelizePass : spmd::impl::ParallelizePassBase<ParallelizePass> {
  using ParallelizePassBase::ParallelizePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::unique_ptr<ParallelMode> parallelMode = createParallelMode(mode);
    if (!parallelMode) {
      module.emitError("spmd-parallelize: ")
          << (mode.empty() ? "no mode given" : "unknown mode '" + mode + "'")
          << "; registered modes: " << llvm::join(getParallelModeNames(), ", ");
      return signalPassFailure();
    }
    ParallelOptions options;
    FailureOr<std::vector<int64_t>> shape = parseMeshShape(mesh);
    if (failed(shape)) {
      module.emitError("spmd-parallelize: mesh '")
          << mesh << "' is not N or DPxTP with positive sizes";
      return signalPassFailure();
    }
    std::string why =
        layout::validate({}, *shape,
                         std::vector<layout::Placement>(
                             shape->size(), layout::Placement::replicate()));
    if (!why.empty()) {
      module.emitError("spmd-parallelize: mesh '") << mesh << "': " << why;
      return signalPassFailure();
    }
    options.meshShape = *shape;
    options.options["bucket-cap-mb"] = std::to_string(bucketCapMb);
    if (!placements.empty())
      options.options["placements"] = placements;
    if (!plan.empty())
      options.options["plan"] = plan;
    if (failed(parseKeyValues(modeOptions, options.options))) {
      module.emitError("spmd-parallelize: options '")
          << modeOptions << "' are not key=value pairs separated by ';'";
      return signalPassFailure();
    }
    options.runPipeline = [&](OpPassManager &pm, ModuleOp m) {
      return runPipeline(pm, m);
    };
    if (remat != "none") {
      OpPassManager pm(ModuleOp::getOperationName());
      RematPassOptions rematOptions;
      rematOptions.policy = remat;
      pm.addPass(createRematPass(rematOptions));
      if (failed(runPipeline(pm, module)))
        return signalPassFailure();
    }
    if (failed(parallelMode->partition(module, options)) ||
        failed(parallelMode->transformAndCompile(module, options)))
      return signalPassFailure();
    if (overlap != 0) {
      OpPassManager pm(ModuleOp::getOperationName());
      pm.addPass(createOverlapCollectivesPass({overlap}));
      if (failed(runPipeline(pm, module)))
        return signalPassFailure();
    }
  }
};

} // namespace
