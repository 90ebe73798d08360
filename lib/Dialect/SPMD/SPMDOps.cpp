//===- SPMDOps.cpp - spmd dialect operations ------------------------------===//

#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace spmd;

#include "spmd/Dialect/SPMD/SPMDOpInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "spmd/Dialect/SPMD/SPMDOps.cpp.inc"

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  if (shape.empty())
    return emitOpError("mesh shape must have at least one dim");
  for (auto [i, size] : llvm::enumerate(shape))
    if (size < 1)
      return emitOpError("mesh dim ")
             << i << " has size " << size << "; sizes must be >= 1";
  if (getNames().size() != shape.size())
    return emitOpError("has ")
           << getNames().size() << " dim names for a mesh of rank "
           << shape.size();
  llvm::SmallSet<StringRef, 4> seen;
  for (auto [i, name] :
       llvm::enumerate(getNames().getAsValueRange<StringAttr>())) {
    if (name.empty())
      return emitOpError("mesh dim ") << i << " has an empty name";
    if (!seen.insert(name).second)
      return emitOpError("duplicate mesh dim name '") << name << "'";
  }
  std::string reason =
      layout::validate({}, std::vector<int64_t>(shape.begin(), shape.end()),
                       std::vector<layout::Placement>(shape.size()));
  if (!reason.empty())
    return emitOpError(reason);
  return success();
}

int64_t MeshOp::getNumRanks() {
  return layout::numRanks(
      std::vector<int64_t>(getShape().begin(), getShape().end()));
}

int64_t MeshOp::getDimIndex(StringRef name) {
  for (auto [i, dimName] :
       llvm::enumerate(getNames().getAsValueRange<StringAttr>()))
    if (dimName == name)
      return i;
  return -1;
}

//===----------------------------------------------------------------------===//
// RedistributeOp
//===----------------------------------------------------------------------===//

LogicalResult RedistributeOp::verify() {
  if (getFrom().getMesh() != getTo().getMesh())
    return emitOpError("redistributes between different meshes (")
           << getFrom().getMesh() << " and " << getTo().getMesh() << ")";
  return success();
}

/// Both layouts of a global-view layout change fit the input and the mesh.
static LogicalResult verifyLayoutChange(Operation *op, Value input,
                                        LayoutAttr from, LayoutAttr to,
                                        SymbolTableCollection &symbolTable) {
  auto type = llvm::cast<ShapedType>(input.getType());
  for (auto [name, layoutAttr] :
       {std::pair<StringRef, LayoutAttr>{"'from'", from},
        std::pair<StringRef, LayoutAttr>{"'to'", to}})
    if (failed(layoutAttr.verifyFor(
            op, type,
            [&, name = name] { return op->emitOpError() << name << " "; },
            &symbolTable)))
      return failure();
  return success();
}

LogicalResult
RedistributeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyLayoutChange(*this, getInput(), getFrom(), getTo(), symbolTable);
}

//===----------------------------------------------------------------------===//
// KeepLocalOp
//===----------------------------------------------------------------------===//

LogicalResult KeepLocalOp::verify() {
  if (getFrom().getMesh() != getTo().getMesh())
    return emitOpError("changes between different meshes (")
           << getFrom().getMesh() << " and " << getTo().getMesh() << ")";
  std::vector<layout::Placement> from = getFrom().getLayoutPlacements();
  std::vector<layout::Placement> to = getTo().getLayoutPlacements();
  if (from.size() != to.size())
    return emitOpError("'from' has ")
           << from.size() << " placements and 'to' " << to.size();
  for (size_t m = 0; m < from.size(); ++m) {
    bool kept = from[m].kind == layout::Placement::Kind::Partial &&
                to[m].kind == layout::Placement::Kind::Replicate;
    if (!kept && from[m] != to[m])
      return emitOpError("mesh dim ")
             << m << " changes " << from[m].str() << " to " << to[m].str()
             << "; only a Partial may become Replicate";
  }
  return success();
}

LogicalResult
KeepLocalOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyLayoutChange(*this, getInput(), getFrom(), getTo(), symbolTable);
}

//===----------------------------------------------------------------------===//
// ShardingConstraintOp
//===----------------------------------------------------------------------===//

LogicalResult ShardingConstraintOp::verify() {
  int64_t rank = getLayout().getPlacements().size();
  SmallVector<int64_t> free(getFreeMeshDims().value_or(ArrayRef<int64_t>{}));
  for (auto [i, m] : llvm::enumerate(free)) {
    if (m < 0 || m >= rank)
      return emitOpError("free mesh dim ")
             << m << " is out of range for a layout of " << rank
             << " mesh dims";
    if (llvm::is_contained(ArrayRef<int64_t>(free).take_front(i), m))
      return emitOpError("free mesh dim ") << m << " is listed twice";
  }
  return success();
}

bool ShardingConstraintOp::isFree(int64_t m) {
  auto free = getFreeMeshDims();
  return free && llvm::is_contained(*free, m);
}

LogicalResult
ShardingConstraintOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return getLayout().verifyFor(
      *this, llvm::cast<ShapedType>(getInput().getType()),
      [&] { return emitOpError("layout "); }, &symbolTable);
}

std::optional<std::pair<LayoutAttr, LayoutAttr>>
spmd::getFixedLayoutChange(Operation *op) {
  if (auto r = llvm::dyn_cast<RedistributeOp>(op))
    return std::make_pair(r.getFrom(), r.getTo());
  if (auto k = llvm::dyn_cast<KeepLocalOp>(op))
    return std::make_pair(k.getFrom(), k.getTo());
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Checks what can be checked without the mesh: same element type and rank,
/// unique non-negative mesh dims and tensor dims in range.
static LogicalResult verifyCollectiveLocal(Operation *op,
                                           ArrayRef<int64_t> meshDims,
                                           ArrayRef<int64_t> tensorDims) {
  auto inType = llvm::cast<ShapedType>(op->getOperand(0).getType());
  auto outType = llvm::cast<ShapedType>(op->getResult(0).getType());
  if (inType.getElementType() != outType.getElementType())
    return op->emitOpError("element type changes from ")
           << inType.getElementType() << " to " << outType.getElementType();
  if (inType.getRank() != outType.getRank())
    return op->emitOpError("rank changes from ")
           << inType.getRank() << " to " << outType.getRank();
  if (meshDims.empty())
    return op->emitOpError("needs at least one mesh dim");
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t d : meshDims) {
    if (d < 0)
      return op->emitOpError("mesh dim ") << d << " is negative";
    if (!seen.insert(d).second)
      return op->emitOpError("mesh dim ") << d << " appears twice";
  }
  for (int64_t d : tensorDims)
    if (d < 0 || d >= inType.getRank())
      return op->emitOpError("tensor dim ")
             << d << " is out of range for rank " << inType.getRank();
  return success();
}

LogicalResult
spmd::detail::verifyCollectiveGroup(CollectiveOpInterface op,
                                    SymbolTableCollection &symbolTable) {
  MeshOp mesh = lookupMesh(op, op.getMeshAttr(), &symbolTable);
  if (!mesh)
    return failure();
  int64_t groupSize = 1;
  for (int64_t d : op.getMeshDims()) {
    if (d >= mesh.getRank())
      return op->emitOpError("mesh dim ")
             << d << " is out of range for mesh " << op.getMeshAttr()
             << " of rank " << mesh.getRank();
    groupSize *= mesh.getShape()[d];
  }
  return op.verifyGroupShapes(groupSize);
}

/// Checks `result = input` except along the dims in `scaled`: a dim marked
/// `true` grows by the group size, one marked `false` shrinks by it (and
/// must divide evenly).
static LogicalResult
verifyScaledShape(Operation *op, int64_t groupSize,
                  ArrayRef<std::pair<int64_t, bool>> scaled) {
  auto inType = llvm::cast<ShapedType>(op->getOperand(0).getType());
  auto outType = llvm::cast<ShapedType>(op->getResult(0).getType());
  SmallVector<int64_t> expected(inType.getShape());
  for (auto [dim, grows] : scaled) {
    if (grows) {
      expected[dim] *= groupSize;
    } else {
      if (expected[dim] % groupSize != 0)
        return op->emitOpError("dim ")
               << dim << " of size " << expected[dim]
               << " does not divide evenly over a group of " << groupSize
               << " ranks";
      expected[dim] /= groupSize;
    }
  }
  if (ArrayRef<int64_t>(expected) != outType.getShape()) {
    InFlightDiagnostic diag = op->emitOpError("expected result shape [");
    llvm::interleaveComma(expected, diag);
    return diag << "] for a group of " << groupSize << " ranks, got "
                << outType;
  }
  return success();
}

LogicalResult AllReduceOp::verify() {
  return verifyCollectiveLocal(*this, getMeshDims(), {});
}
LogicalResult AllReduceOp::verifyGroupShapes(int64_t) { return success(); }

LogicalResult AllGatherOp::verify() {
  return verifyCollectiveLocal(*this, getMeshDims(),
                               {static_cast<int64_t>(getGatherDim())});
}
LogicalResult AllGatherOp::verifyGroupShapes(int64_t groupSize) {
  return verifyScaledShape(*this, groupSize, {{getGatherDim(), true}});
}

LogicalResult ReduceScatterOp::verify() {
  return verifyCollectiveLocal(*this, getMeshDims(),
                               {static_cast<int64_t>(getScatterDim())});
}
LogicalResult ReduceScatterOp::verifyGroupShapes(int64_t groupSize) {
  return verifyScaledShape(*this, groupSize, {{getScatterDim(), false}});
}

LogicalResult AllToAllOp::verify() {
  return verifyCollectiveLocal(*this, getMeshDims(),
                               {static_cast<int64_t>(getSplitDim()),
                                static_cast<int64_t>(getConcatDim())});
}
LogicalResult AllToAllOp::verifyGroupShapes(int64_t groupSize) {
  // Shrinking before growing also checks divisibility when both dims match.
  return verifyScaledShape(*this, groupSize,
                           {{getSplitDim(), false}, {getConcatDim(), true}});
}

LogicalResult BroadcastOp::verify() {
  if (getRootAttr().getInt() < 0)
    return emitOpError("root must be non-negative, got ")
           << getRootAttr().getInt();
  return verifyCollectiveLocal(*this, getMeshDims(), {});
}
LogicalResult BroadcastOp::verifyGroupShapes(int64_t groupSize) {
  if (getRootAttr().getInt() >= groupSize)
    return emitOpError("root ")
           << getRoot() << " is out of range for a group of " << groupSize
           << " ranks";
  return success();
}

//===----------------------------------------------------------------------===//
// LocalTakeOp
//===----------------------------------------------------------------------===//

LogicalResult LocalTakeOp::verify() {
  auto inType = llvm::cast<ShapedType>(getInput().getType());
  auto outType = llvm::cast<ShapedType>(getResult().getType());
  if (inType.getElementType() != outType.getElementType())
    return emitOpError("element type changes from ")
           << inType.getElementType() << " to " << outType.getElementType();
  if (inType.getRank() != outType.getRank())
    return emitOpError("rank changes from ")
           << inType.getRank() << " to " << outType.getRank();
  int64_t dim = getDim();
  if (dim < 0 || dim >= inType.getRank())
    return emitOpError("dim ")
           << dim << " is out of range for rank " << inType.getRank();
  for (int64_t d = 0; d < inType.getRank(); ++d)
    if (d != dim && inType.getDimSize(d) != outType.getDimSize(d))
      return emitOpError("dim ")
             << d << " changes size from " << inType.getDimSize(d) << " to "
             << outType.getDimSize(d) << "; only dim " << dim << " may";
  bool table = getIndices().has_value();
  bool runs = getStarts().has_value() || getCounts().has_value();
  if (table == runs)
    return emitOpError("needs either `indices` or `starts` and `counts`");
  if (runs && (!getStarts() || !getCounts() ||
               getStarts()->size() != getCounts()->size()))
    return emitOpError("needs `starts` and `counts` of equal length");
  if (getUniform() && !runs)
    return emitOpError("is `uniform` without `starts` and `counts`: only "
                       "runs can be shared by every rank");
  // (The tables hold one entry per rank and position: sizes read once.)
  int64_t inSize = inType.getDimSize(dim), outSize = outType.getDimSize(dim);
  if (table) {
    ArrayRef<int64_t> indices = *getIndices();
    for (int64_t index : indices)
      if (index < -1 || index >= inSize)
        return emitOpError("index ")
               << index << " is outside [-1, " << inSize << ")";
    return success();
  }
  ArrayRef<int64_t> starts = *getStarts(), counts = *getCounts();
  for (auto [start, count] : llvm::zip(starts, counts))
    if (start < -1 || count < 0 || count > outSize ||
        (start >= 0 && start + count > inSize))
      return emitOpError("run [")
             << start << ", " << start + count << ") does not fit " << outSize
             << " result positions and " << inSize << " input positions";
  return success();
}

LogicalResult
LocalTakeOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  MeshOp mesh = lookupMesh(getOperation(), getMeshAttr(), &symbolTable);
  if (!mesh)
    return failure();
  int64_t size =
      llvm::cast<ShapedType>(getResult().getType()).getDimSize(getDim());
  if (getStarts()) {
    // Uniform runs are one rank's, which every rank takes.
    int64_t runs = getStarts()->size(),
            ranks = getUniform() ? 1 : mesh.getNumRanks();
    if (runs == 0 || runs % ranks)
      return emitOpError("has ")
             << runs << " runs; the mesh has " << ranks
             << " ranks, and each needs the same number of runs";
    int64_t perRank = runs / ranks;
    for (int64_t r = 0; r < ranks; ++r) {
      int64_t total = 0;
      for (int64_t count : getCounts()->slice(r * perRank, perRank))
        total += count;
      if (total > size)
        return emitOpError("gives rank ")
               << r << " runs of " << total << " positions; the result has "
               << size << " along dim " << getDim();
    }
    return success();
  }
  int64_t want = mesh.getNumRanks() * size;
  if (static_cast<int64_t>(getIndices()->size()) != want)
    return emitOpError("has ")
           << getIndices()->size() << " indices; the mesh has "
           << mesh.getNumRanks() << " ranks and the result " << size
           << " positions along dim " << getDim() << ", so " << want
           << " are needed";
  return success();
}

LogicalResult WaitOp::verify() {
  auto collective = getInput().getDefiningOp<CollectiveOpInterface>();
  if (!collective || collective->getBlock() != (*this)->getBlock())
    return emitOpError("waits for a value that is not the result of a "
                       "collective in the same block");
  return success();
}

bool WaitOp::isAsync(CollectiveOpInterface op) {
  Value result = op->getResult(0);
  return !result.use_empty() &&
         llvm::all_of(result.getUsers(),
                      [](Operation *user) { return isa<WaitOp>(user); });
}

WaitOp WaitOp::getCompletingWait(CollectiveOpInterface op) {
  if (!isAsync(op))
    return nullptr;
  WaitOp first;
  for (Operation *user : op->getResult(0).getUsers())
    if (!first || user->isBeforeInBlock(first))
      first = cast<WaitOp>(user);
  return first;
}
