//===- ParallelMode.cpp - mode registry, helpers, --spmd-parallelize ------===//

#include "spmd/Parallel/ParallelMode.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/DataParallel.h"
#include "spmd/Parallel/Passes.h"
#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Passes.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
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

BlockArgument spmd::getCastArgument(Value v) {
  if (auto c = v.getDefiningOp<aten::ToCopyOp>())
    v = c.getSelf();
  return dyn_cast<BlockArgument>(v);
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

/// MLIR's canonicalization patterns (every loaded dialect's and registered
/// op's) and CSE on `module`, as `--canonicalize --cse` run them (top-down
/// traversal), minus the verification a nested pass would add, the region
/// simplification and the iterations after the first: the step is one
/// straight-line block, where the driver erases dead ops itself and its
/// worklist revisits every op a rewrite touches, so a second iteration
/// would walk the whole step to find nothing (the outputs are the same,
/// checked on the zoo's steps in every mode).
void cleanUp(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  RewritePatternSet patterns(ctx);
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : ctx->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, ctx);
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true);
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  config.setMaxIterations(1);
  (void)applyPatternsGreedily(
      module, FrozenRewritePatternSet(std::move(patterns)), config);
  IRRewriter rewriter(ctx);
  DominanceInfo dominance(module);
  eliminateCommonSubExpressions(rewriter, dominance, module);
}
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
  for (auto [p, s] : llvm::zip(pats, parts)) {
    // A component without wildcards is compared as it is (the common case:
    // module names).
    if (p.find_first_of("*?[{\\") == StringRef::npos) {
      if (p != s)
        return false;
      continue;
    }
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(p);
    if (!glob) {
      llvm::consumeError(glob.takeError());
      return false;
    }
    if (!glob->match(s))
      return false;
  }
  return true;
}

/// The number of equal pieces every use of `v` splits its dim 0 into (a
/// training step's micro-batches: `x.chunk(k)` or `x.split(m)` in a loop of
/// backward()s), or nullopt when some use does something else, or the
/// pieces differ in size.
static std::optional<int64_t> equalSplitsOfDim0(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  std::optional<int64_t> pieces;
  for (Operation *user : v.getUsers()) {
    if (!user->hasTrait<aten::OpTrait::Split>() || user->getOperand(0) != v ||
        user->getNumResults() < 2)
      return std::nullopt;
    for (Type t : user->getResultTypes()) {
      auto piece = cast<RankedTensorType>(t);
      if (piece.getShape().drop_front() != type.getShape().drop_front() ||
          piece.getDimSize(0) * user->getNumResults() != type.getDimSize(0))
        return std::nullopt;
    }
    if (pieces && *pieces != static_cast<int64_t>(user->getNumResults()))
      return std::nullopt;
    pieces = user->getNumResults();
  }
  return pieces;
}

/// A batch argument that the step splits into k equal micro-batches along
/// dim 0 takes StridedShard(0, k) where its layout has Shard(0): each rank
/// holds its Shard(0) piece of every micro-batch, so the micro-steps are
/// data parallel too (DTensor `_StridedShard`: Shard(0) after a
/// torch.chunk into k). Left as it is when a micro-batch does not divide
/// over the mesh dims that shard it.
static void shardMicroBatches(Value arg, ArrayRef<int64_t> meshShape,
                              std::vector<layout::Placement> &placements) {
  std::optional<int64_t> k = equalSplitsOfDim0(arg);
  if (!k)
    return;
  int64_t ranks = 1;
  for (auto [m, p] : llvm::enumerate(placements))
    if (p.kind == layout::Placement::Kind::Shard && p.dim == 0)
      ranks *= meshShape[m];
  int64_t piece = cast<RankedTensorType>(arg.getType()).getDimSize(0) / *k;
  if (ranks == 1 || piece % ranks != 0)
    return;
  for (layout::Placement &p : placements)
    if (p.kind == layout::Placement::Kind::Shard && p.dim == 0)
      p = layout::Placement::stridedShard(0, *k);
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
    if (role == "input" || role == "target")
      shardMicroBatches(fn.getArgument(i), options.meshShape, *p);
    std::string why = layout::validate(shapeOf(type), options.meshShape, *p);
    if (!why.empty())
      return emitError(fn.getArgument(i).getLoc(), "argument '")
             << (fqn.empty() ? StringRef("?") : fqn)
             << "' cannot take its layout: " << why;
    argLayouts[i] = getLayoutAttr(meshRef, *p);
  }
  setArgLayouts(fn,
                SmallVector<Attribute>(argLayouts.begin(), argLayouts.end()));
  SmallVector<Attribute> resultLayouts(fn.getNumResults());
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (DictionaryAttr attrs = fn.getResultAttrDict(i))
      if (auto updates = attrs.getAs<IntegerAttr>("spmd.updates"))
        if (updates.getInt() >= 0 &&
            updates.getInt() < static_cast<int64_t>(argLayouts.size()))
          resultLayouts[i] = argLayouts[updates.getInt()];
  setResultLayouts(fn, resultLayouts);
  if (beforePropagate && failed(beforePropagate(fn)))
    return failure();

  OpPassManager pm(ModuleOp::getOperationName());
  PropagatePassOptions propagate;
  auto search = options.options.find("search");
  if (search != options.options.end())
    propagate.search = search->second;
  // Propagation runs as a nested pass (its own timing and IR dumps, and
  // MLIR's verification of the annotated step). Partitioning and the
  // cleanup run in place: MLIR would verify the whole step after each
  // nested pass (70 M instructions a time on Llama-3-8B's step, 4% of the
  // pass), where the partitioner verifies each op it rewrites and the pass
  // manager verifies the per-rank program after spmd-parallelize.
  // Propagation writes no redundant ops (one redistribute per value and
  // layout), so the cleanup runs once, on the per-rank program; the passes
  // read meaning from attributes, not from locations or op identity, which
  // the cleanup may merge or drop.
  pm.addPass(createPropagatePass(propagate));
  if (failed(options.runPipeline(pm, module)) ||
      failed(partitionModule(module)))
    return failure();
  cleanUp(module);
  return success();
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
    // The whole pipeline on `m`: recomputation (`policy` on `units`), the
    // mode, the overlap.
    auto parallelizeModule = [&](ModuleOp m, StringRef policy,
                                 StringRef units) -> LogicalResult {
      if (policy != "none") {
        OpPassManager pm(ModuleOp::getOperationName());
        RematPassOptions rematOptions;
        rematOptions.policy = policy.str();
        rematOptions.units = units.str();
        pm.addPass(createRematPass(rematOptions));
        if (failed(runPipeline(pm, m)))
          return failure();
      }
      if (failed(parallelMode->partition(m, options)) ||
          failed(parallelMode->transformAndCompile(m, options)))
        return failure();
      fuseIndependentAllReduces(m);
      if (overlap == 0)
        return success();
      OpPassManager pm(ModuleOp::getOperationName());
      pm.addPass(createOverlapCollectivesPass({overlap}));
      return runPipeline(pm, m);
    };
    if (remat != "auto") {
      if (!budget.empty()) {
        module.emitError("spmd-parallelize: budget needs remat=auto");
        return signalPassFailure();
      }
      if (failed(parallelizeModule(module, remat, "auto")))
        signalPassFailure();
      return;
    }
    FailureOr<std::pair<std::string, std::string>> choice =
        chooseRecomputation(module, parallelizeModule);
    if (failed(choice) ||
        failed(parallelizeModule(module, choice->first, choice->second)))
      signalPassFailure();
  }

  /// remat=auto: the least recomputation whose predicted peak memory per
  /// rank (predictPeakMemory) fits `budget`, as (policy, units): none;
  /// else selective on the first k units, the least k that fits; else
  /// full on the first k. Each try parallelizes a copy of the module
  /// (nested in it while it runs). A remark names the choice.
  template <typename Parallelize>
  FailureOr<std::pair<std::string, std::string>>
  chooseRecomputation(ModuleOp module, Parallelize &parallelizeModule) {
    FailureOr<int64_t> limit = parseBytes(budget);
    if (failed(limit)) {
      module.emitError("spmd-parallelize: budget '")
          << budget << "' is not a size (bytes, or with KiB, MiB, GiB, TiB)";
      return failure();
    }
    // The units in the order forward runs them (fsdp's default units).
    FsdpUnits defaults;
    SmallVector<std::string> units;
    module.walk([&](Operation *op) {
      if (getPhase(op) != "forward")
        return;
      std::string unit = defaults.unitOf(getModuleFqn(op));
      if (!unit.empty() && !llvm::is_contained(units, unit))
        units.push_back(unit);
    });
    ModuleOp original = module.clone();
    llvm::scope_exit eraseOriginal([&] { original.erase(); });
    auto peakOf = [&](StringRef policy, size_t k) -> FailureOr<int64_t> {
      ModuleOp trial = original.clone();
      module.getBody()->push_back(trial);
      LogicalResult result = parallelizeModule(
          trial, policy,
          llvm::join(ArrayRef<std::string>(units).take_front(k), ","));
      int64_t peak = 0;
      if (succeeded(result))
        for (auto fn : trial.getOps<func::FuncOp>())
          if (!fn.isExternal())
            peak = std::max(peak, predictPeakMemory(fn).total());
      trial.erase();
      if (failed(result))
        return failure();
      return peak;
    };
    auto chosen = [&](StringRef policy, size_t k, int64_t peak) {
      std::string names =
          llvm::join(ArrayRef<std::string>(units).take_front(k), ",");
      module.emitRemark("spmd-parallelize: remat=auto: ")
          << (k == 0 ? std::string("no recomputation")
                     : (policy + " recomputation of " + names).str())
          << ": predicted peak " << peak << " bytes per rank, budget "
          << *limit;
      return std::make_pair(k == 0 ? std::string("none") : policy.str(), names);
    };
    FailureOr<int64_t> none = peakOf("none", 0);
    if (failed(none))
      return failure();
    int64_t least = *none;
    if (*none <= *limit)
      return chosen("none", 0, *none);
    for (StringRef policy : {"selective", "full"}) {
      FailureOr<int64_t> all = peakOf(policy, units.size());
      if (failed(all))
        return failure();
      least = std::min(least, *all);
      if (units.empty() || *all > *limit)
        continue;
      // The least k that fits (the peak falls as k grows).
      size_t lo = 1, hi = units.size();
      int64_t peak = *all;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        FailureOr<int64_t> p = peakOf(policy, mid);
        if (failed(p))
          return failure();
        if (*p <= *limit) {
          hi = mid;
          peak = *p;
        } else {
          lo = mid + 1;
        }
      }
      return chosen(policy, hi, peak);
    }
    module.emitError("spmd-parallelize: remat=auto: no recomputation fits ")
        << "the budget of " << *limit << " bytes per rank: the least "
        << "predicted peak is " << least << " bytes (full recomputation of "
        << units.size() << " units)";
    return failure();
  }

  /// `text` as bytes: a number with an optional B, KiB, MiB, GiB or TiB
  /// (or KB, MB, GB, TB: powers of 1000).
  static FailureOr<int64_t> parseBytes(StringRef text) {
    text = text.trim();
    static const std::pair<StringRef, double> units[] = {
        {"KiB", 1024.0},
        {"MiB", 1024.0 * 1024},
        {"GiB", 1024.0 * 1024 * 1024},
        {"TiB", 1024.0 * 1024 * 1024 * 1024},
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
        {"B", 1.0}};
    double scale = 1;
    for (auto [suffix, factor] : units)
      if (text.consume_back(suffix)) {
        scale = factor;
        break;
      }
    double value = 0;
    if (text.trim().getAsDouble(value) || value < 0)
      return failure();
    return static_cast<int64_t>(value * scale);
  }
};

} // namespace
