//===- SPMDDialect.cpp - spmd dialect, attributes -------------------------===//

#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <set>

using namespace mlir;
using namespace spmd;

#include "spmd/Dialect/SPMD/SPMDDialect.cpp.inc"
#include "spmd/Dialect/SPMD/SPMDEnums.cpp.inc"

#include "spmd/Dialect/SPMD/SPMDAttrInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "spmd/Dialect/SPMD/SPMDAttrs.cpp.inc"

void SPMDDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "spmd/Dialect/SPMD/SPMDAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "spmd/Dialect/SPMD/SPMDOps.cpp.inc"
      >();
}

layout::ReduceKind spmd::toLayoutReduceKind(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return layout::ReduceKind::Sum;
  case ReduceKind::Avg:
    return layout::ReduceKind::Avg;
  case ReduceKind::Max:
    return layout::ReduceKind::Max;
  case ReduceKind::Min:
    return layout::ReduceKind::Min;
  }
  llvm_unreachable("unknown ReduceKind");
}

ReduceKind spmd::fromLayoutReduceKind(layout::ReduceKind kind) {
  switch (kind) {
  case layout::ReduceKind::Sum:
    return ReduceKind::Sum;
  case layout::ReduceKind::Avg:
    return ReduceKind::Avg;
  case layout::ReduceKind::Max:
    return ReduceKind::Max;
  case layout::ReduceKind::Min:
    return ReduceKind::Min;
  }
  llvm_unreachable("unknown ReduceKind");
}

PlacementAttrInterface
spmd::getPlacementAttr(MLIRContext *ctx, const layout::Placement &placement) {
  using Kind = layout::Placement::Kind;
  switch (placement.kind) {
  case Kind::Replicate:
    return ReplicateAttr::get(ctx);
  case Kind::Partial:
    return PartialAttr::get(ctx, fromLayoutReduceKind(placement.reduce));
  case Kind::Shard:
    return ShardAttr::get(ctx, placement.dim);
  case Kind::StridedShard:
    return StridedShardAttr::get(ctx, placement.dim, placement.splitFactor);
  }
  llvm_unreachable("unknown placement kind");
}

LayoutAttr spmd::getLayoutAttr(FlatSymbolRefAttr mesh,
                               ArrayRef<layout::Placement> placements) {
  SmallVector<PlacementAttrInterface> attrs;
  for (const layout::Placement &p : placements)
    attrs.push_back(getPlacementAttr(mesh.getContext(), p));
  return LayoutAttr::get(mesh.getContext(), mesh, attrs);
}

//===----------------------------------------------------------------------===//
// Placements
//===----------------------------------------------------------------------===//

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t dim) {
  if (dim < 0)
    return emitError() << "shard dim must be non-negative, got " << dim;
  return success();
}

layout::Placement ShardAttr::getPlacement() const {
  return layout::Placement::shard(getDim());
}

LogicalResult
StridedShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t dim, int64_t splitFactor) {
  if (dim < 0)
    return emitError() << "strided_shard dim must be non-negative, got " << dim;
  if (splitFactor < 1)
    return emitError() << "strided_shard split_factor must be >= 1, got "
                       << splitFactor;
  return success();
}

layout::Placement StridedShardAttr::getPlacement() const {
  return layout::Placement::stridedShard(getDim(), getSplitFactor());
}

layout::Placement ReplicateAttr::getPlacement() const {
  return layout::Placement::replicate();
}

layout::Placement PartialAttr::getPlacement() const {
  return layout::Placement::partial(toLayoutReduceKind(getReduce()));
}

//===----------------------------------------------------------------------===//
// LayoutAttr
//===----------------------------------------------------------------------===//

/// Parses one placement in the short form used inside `#spmd.layout<...>`.
static PlacementAttrInterface parsePlacement(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  Attribute attr;
  if (keyword == ShardAttr::getMnemonic())
    attr = ShardAttr::parse(parser, Type());
  else if (keyword == StridedShardAttr::getMnemonic())
    attr = StridedShardAttr::parse(parser, Type());
  else if (keyword == ReplicateAttr::getMnemonic())
    attr = ReplicateAttr::get(parser.getContext());
  else if (keyword == PartialAttr::getMnemonic())
    attr = PartialAttr::parse(parser, Type());
  else
    parser.emitError(loc) << "expected a placement (shard, strided_shard, "
                             "replicate or partial), got '"
                          << keyword << "'";
  return llvm::dyn_cast_or_null<PlacementAttrInterface>(attr);
}

Attribute LayoutAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<PlacementAttrInterface> placements;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() -> ParseResult {
                                       PlacementAttrInterface p =
                                           parsePlacement(parser);
                                       if (!p)
                                         return failure();
                                       placements.push_back(p);
                                       return success();
                                     }) ||
      parser.parseGreater())
    return {};
  return parser.getChecked<LayoutAttr>(loc, parser.getContext(), mesh,
                                       placements);
}

void LayoutAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(
      getPlacements(), printer, [&](PlacementAttrInterface p) {
        Attribute attr = p;
        llvm::TypeSwitch<Attribute>(attr)
            .Case([&](ShardAttr a) {
              printer << a.getMnemonic();
              a.print(printer);
            })
            .Case([&](StridedShardAttr a) {
              printer << a.getMnemonic();
              a.print(printer);
            })
            .Case([&](PartialAttr a) {
              printer << a.getMnemonic();
              a.print(printer);
            })
            .Case([&](ReplicateAttr a) { printer << a.getMnemonic(); });
      });
  printer << "]>";
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 FlatSymbolRefAttr mesh,
                                 ArrayRef<PlacementAttrInterface> placements) {
  if (!mesh)
    return emitError() << "layout needs a mesh symbol";
  if (placements.empty())
    return emitError() << "layout needs one placement per mesh dim, got none";
  return success();
}

std::vector<layout::Placement> LayoutAttr::getLayoutPlacements() const {
  std::vector<layout::Placement> result;
  for (PlacementAttrInterface p : getPlacements())
    result.push_back(p.getPlacement());
  return result;
}

LogicalResult
LayoutAttr::verifyFor(Operation *from, ShapedType type,
                      function_ref<InFlightDiagnostic()> emitError,
                      SymbolTableCollection *symbolTable) const {
  MeshOp mesh = lookupMesh(from, getMesh(), symbolTable);
  if (!mesh)
    return failure();
  if (!type.hasStaticShape())
    return emitError() << "layout " << *this
                       << " needs a statically shaped tensor, got " << type;
  std::vector<int64_t> meshShape(mesh.getShape().begin(),
                                 mesh.getShape().end());
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  std::string reason =
      layout::validate(shape, meshShape, getLayoutPlacements());
  if (!reason.empty())
    return emitError() << "layout " << *this << " does not fit " << type
                       << " on mesh " << getMesh() << ": " << reason;
  return success();
}

MeshOp spmd::lookupMesh(Operation *from, FlatSymbolRefAttr meshRef,
                        SymbolTableCollection *symbolTable) {
  Operation *found = symbolTable
                         ? symbolTable->lookupNearestSymbolFrom(from, meshRef)
                         : SymbolTable::lookupNearestSymbolFrom(from, meshRef);
  auto mesh = llvm::dyn_cast_or_null<MeshOp>(found);
  if (!mesh)
    from->emitError() << "'" << meshRef
                      << "' does not reference a valid spmd.mesh";
  return mesh;
}

//===----------------------------------------------------------------------===//
// Function argument/result attributes
//===----------------------------------------------------------------------===//

/// Roles a captured training step gives its arguments and results: `grad`
/// is a parameter's gradient carried from call to call (accumulated over
/// calls, of the parameter's shape); `lr`, `hyperparameter` and `step` are
/// the optimizer's per-step inputs (its learning rate, another
/// hyperparameter a schedule changes, such as OneCycleLR's momentum, and the
/// number of steps taken before this one), 0-dim.
static constexpr llvm::StringLiteral kArgRoles[] = {
    "param", "buffer",         "optim_state", "grad",  "lr",
    "step",  "hyperparameter", "input",       "target"};
static constexpr llvm::StringLiteral kResultRoles[] = {"loss", "output"};

/// Checks that `value` is a string and, unless `allowed` is empty, one of
/// `allowed`; emits "expected a string, got ..." or "expected one of ...,
/// got ..." through `emit` otherwise.
static LogicalResult verifyString(Attribute value,
                                  ArrayRef<llvm::StringLiteral> allowed,
                                  function_ref<InFlightDiagnostic()> emit) {
  auto str = llvm::dyn_cast<StringAttr>(value);
  if (allowed.empty()) {
    if (!str)
      return emit() << "expected a string, got " << value;
    return success();
  }
  if (!str || !llvm::is_contained(allowed, str.getValue())) {
    InFlightDiagnostic diag = emit() << "expected one of ";
    llvm::interleaveComma(allowed, diag);
    return diag << ", got " << value;
  }
  return success();
}

/// Checks one `spmd.*` attribute on argument or result #`index` (of type
/// `type`) of `op`: `spmd.layout` (a layout that fits the tensor and its
/// mesh), `spmd.fqn` (a string), `spmd.role` (one of `roles`) and, on results
/// only, `spmd.updates` (the index of the argument the result updates).
static LogicalResult verifyValueAttr(Operation *op, NamedAttribute attr,
                                     Type type, bool isResult, unsigned index) {
  StringRef name = attr.getName().strref();
  StringRef what = isResult ? "result" : "argument";
  auto emit = [&]() {
    return op->emitError() << "'" << name << "' on " << what << " #" << index
                           << ": ";
  };
  if (name == SPMDDialect::getLayoutAttrName()) {
    auto layout = llvm::dyn_cast<LayoutAttr>(attr.getValue());
    if (!layout)
      return emit() << "expected a #spmd.layout, got " << attr.getValue();
    auto shaped = llvm::dyn_cast<RankedTensorType>(type);
    if (!shaped)
      return emit() << "expected a ranked tensor, got " << type;
    return layout.verifyFor(op, shaped, emit);
  }
  if (name == "spmd.fqn")
    return verifyString(attr.getValue(), {}, emit);
  if (name == "spmd.role")
    return verifyString(attr.getValue(),
                        isResult ? ArrayRef(kResultRoles) : ArrayRef(kArgRoles),
                        emit);
  if (isResult && name == "spmd.updates") {
    auto func = llvm::dyn_cast<FunctionOpInterface>(op);
    auto argIndex = llvm::dyn_cast<IntegerAttr>(attr.getValue());
    if (!argIndex || !func || argIndex.getInt() < 0 ||
        argIndex.getInt() >= static_cast<int64_t>(func.getNumArguments()))
      return emit() << "expected the index of an argument, got "
                    << attr.getValue();
    if (func.getArgumentTypes()[argIndex.getInt()] != type)
      return emit() << "updates argument #" << argIndex.getInt() << " of type "
                    << func.getArgumentTypes()[argIndex.getInt()]
                    << ", but the result has type " << type;
    return success();
  }
  return emit() << "unknown spmd attribute";
}

/// Phases of a training step spmd-capture gives its ops (`spmd.phase`).
static constexpr llvm::StringLiteral kPhases[] = {"forward", "loss", "backward",
                                                  "optimizer"};

LogicalResult SPMDDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  if (name == getReplicatedAttrName()) {
    if (!llvm::isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a unit attribute";
    return success();
  }
  // Other spmd.* op attributes are the passes' own annotations.
  if (name != getModuleAttrName() && name != getPhaseAttrName())
    return success();
  return verifyString(
      attr.getValue(),
      name == getPhaseAttrName() ? ArrayRef(kPhases)
                                 : ArrayRef<llvm::StringLiteral>(),
      [&] { return op->emitOpError() << "'" << name << "': "; });
}

LogicalResult SPMDDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  Region &region = op->getRegion(regionIndex);
  // Declarations have no body; their argument types come from the function.
  Type type;
  if (auto func = llvm::dyn_cast<FunctionOpInterface>(op))
    type = func.getArgumentTypes()[argIndex];
  else
    type = region.getArgument(argIndex).getType();
  return verifyValueAttr(op, attr, type, /*isResult=*/false, argIndex);
}

LogicalResult SPMDDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto func = llvm::dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError() << "'" << attr.getName()
                           << "' is only valid on function results";
  return verifyValueAttr(op, attr, func.getResultTypes()[resultIndex],
                         /*isResult=*/true, resultIndex);
}

MeshOp spmd::getOnlyMesh(ModuleOp module, StringRef pass) {
  auto meshes = llvm::to_vector(module.getOps<MeshOp>());
  if (meshes.size() == 1)
    return meshes.front();
  module.emitError() << pass << " needs exactly one spmd.mesh, found "
                     << meshes.size();
  return {};
}

SmallVector<int64_t> MeshRefinement::refine(StringRef mesh,
                                            ArrayRef<int64_t> meshDims) const {
  SmallVector<int64_t> dims;
  const auto &meshSpans = spans.find(mesh)->second;
  for (int64_t d : meshDims)
    dims.append(meshSpans[d].begin(), meshSpans[d].end());
  return dims;
}

FailureOr<MeshRefinement> spmd::refineMeshes(ModuleOp module, StringRef pass) {
  MeshRefinement refinement;
  auto meshes = llvm::to_vector(module.getOps<MeshOp>());
  if (meshes.empty()) {
    refinement.shape = {1};
    return refinement;
  }
  MeshOp first = meshes.front();
  if (meshes.size() == 1) {
    refinement.shape.assign(first.getShape().begin(), first.getShape().end());
    auto &spans = refinement.spans[first.getSymName()];
    for (int64_t d = 0; d < first.getRank(); ++d)
      spans.push_back({d});
    return refinement;
  }
  // Each mesh cuts the ranks at the products of its leading dims; the
  // refined mesh cuts them at all of those, which must form a chain of
  // divisors.
  std::set<int64_t> cuts;
  for (MeshOp mesh : meshes) {
    if (mesh.getNumRanks() != first.getNumRanks())
      return mesh.emitOpError()
             << pass << ": has " << mesh.getNumRanks()
             << " ranks, the program's mesh @" << first.getSymName() << " has "
             << first.getNumRanks();
    int64_t product = 1;
    for (int64_t size : mesh.getShape())
      cuts.insert(product *= size);
  }
  int64_t previous = 1;
  for (int64_t cut : cuts) {
    if (cut == 1)
      continue;
    if (cut % previous != 0) {
      MeshOp culprit = meshes.front();
      for (MeshOp mesh : meshes) {
        int64_t product = 1;
        for (int64_t size : mesh.getShape())
          if ((product *= size) == cut)
            culprit = mesh;
      }
      return culprit.emitOpError()
             << pass << ": cuts the ranks at " << cut
             << ", which another mesh's cut at " << previous
             << " does not divide: the meshes are not views of one mesh";
    }
    refinement.shape.push_back(cut / previous);
    previous = cut;
  }
  if (refinement.shape.empty())
    refinement.shape = {1};
  for (MeshOp mesh : meshes) {
    auto &spans = refinement.spans[mesh.getSymName()];
    int64_t next = 0; // the first refined dim not yet spanned
    for (int64_t size : mesh.getShape()) {
      SmallVector<int64_t, 2> &span = spans.emplace_back();
      for (int64_t covered = 1; size != 1 && covered != size; ++next) {
        covered *= refinement.shape[next];
        span.push_back(next);
      }
    }
  }
  return refinement;
}

StringRef spmd::getPhase(Operation *op) {
  auto phase = op->getAttrOfType<StringAttr>(SPMDDialect::getPhaseAttrName());
  return phase ? phase.getValue() : "";
}

StringRef spmd::getModuleFqn(Operation *op) {
  auto fqn = op->getAttrOfType<StringAttr>(SPMDDialect::getModuleAttrName());
  return fqn ? fqn.getValue() : "";
}

void spmd::copyProvenance(Operation *from, Operation *to) {
  for (StringRef name :
       {SPMDDialect::getModuleAttrName(), SPMDDialect::getPhaseAttrName()})
    if (Attribute attr = from->getAttr(name))
      to->setAttr(name, attr);
}

LogicalResult spmd::verifyPartitionable(ModuleOp module, StringRef pass) {
  // Each type is checked once (a step has a few dozen distinct ones).
  DenseSet<Type> fits;
  auto tooLarge = [&](Type type, auto emit) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || fits.contains(type))
      return success();
    std::string why = layout::checkTensorShape(std::vector<int64_t>(
        tensor.getShape().begin(), tensor.getShape().end()));
    if (why.empty()) {
      fits.insert(type);
      return success();
    }
    return emit() << pass << ": " << type << " is too large: " << why;
  };
  for (auto fn : module.getOps<FunctionOpInterface>()) {
    if (fn.isExternal())
      continue;
    if (!fn.getFunctionBody().hasOneBlock())
      return fn->emitOpError("must have a single block: ")
             << pass << " works on captured straight-line training steps";
    for (BlockArgument arg : fn.getArguments())
      if (failed(
              tooLarge(arg.getType(), [&] { return emitError(arg.getLoc()); })))
        return failure();
    WalkResult walk = fn.walk([&](Operation *op) {
      for (Type type : op->getResultTypes())
        if (failed(tooLarge(type, [&] { return op->emitOpError(); })))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return success();
}
