//===- Executable.cpp - a per-rank program, lowered and JIT-compiled ------===//

#include "Executable.h"

#include "spmd/Conversion/Passes.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <mpi.h>

#include <functional>

using namespace mlir;
using namespace spmd::run;

#define FATAL(...) spmd_rt_fatal(__VA_ARGS__)

std::string spmd::run::typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

std::optional<int32_t> spmd::run::dtypeOf(Type type) {
  if (type.isF32())
    return SPMD_F32;
  if (type.isF64())
    return SPMD_F64;
  if (type.isBF16())
    return SPMD_BF16;
  if (type.isInteger(64))
    return SPMD_I64;
  if (type.isInteger(32))
    return SPMD_I32;
  if (type.isInteger(1))
    return SPMD_I1;
  return std::nullopt;
}

/// `meshName`: the program's mesh, the one every layout must name.
static Slot readSlot(Type type, DictionaryAttr attrs, const char *what,
                     unsigned i, StringRef function, StringRef meshName) {
  Slot slot;
  slot.type = dyn_cast<RankedTensorType>(type);
  if (!slot.type || !dtypeOf(slot.type.getElementType()))
    FATAL("%s %u of @%s has type %s, which the runtime cannot load", what, i,
          function.str().c_str(), typeString(type).c_str());
  if (!attrs)
    return slot;
  if (auto fqn = attrs.getAs<StringAttr>("spmd.fqn"))
    slot.fqn = fqn.str();
  if (auto layout = attrs.getAs<spmd::LayoutAttr>("spmd.layout")) {
    if (layout.getMesh().getValue() != meshName)
      FATAL("%s %u of @%s is laid out on @%s, not on the program's mesh @%s",
            what, i, function.str().c_str(),
            layout.getMesh().getValue().str().c_str(), meshName.str().c_str());
    slot.placements = layout.getLayoutPlacements();
  }
  if (auto updates = attrs.getAs<IntegerAttr>("spmd.updates"))
    slot.updates = updates.getInt();
  return slot;
}

std::vector<std::vector<int64_t>>
spmd::run::mapsFor(const Slot &slot, const std::vector<int64_t> &global,
                   const std::vector<int64_t> &mesh,
                   const std::vector<int64_t> &coords) {
  std::vector<layout::Placement> placements = slot.placements;
  for (const layout::Placement &p : placements)
    if (p.kind == layout::Placement::Kind::Partial &&
        p.reduce != layout::ReduceKind::Sum)
      FATAL("'%s' has a Partial layout that is not a sum: only Shard, "
            "Replicate and Partial(sum) values are loaded and gathered",
            slot.fqn.c_str());
  if (placements.empty())
    placements.assign(mesh.size(), layout::Placement::replicate());
  std::string why = layout::validate(global, mesh, placements, coords);
  if (!why.empty())
    FATAL("'%s': layout does not fit global shape: %s", slot.fqn.c_str(),
          why.c_str());
  return localIndexMaps(global, mesh, placements, coords);
}

bool spmd::run::hasPartial(const Slot &slot) {
  return llvm::any_of(slot.placements, [](const layout::Placement &p) {
    return p.kind == layout::Placement::Kind::Partial;
  });
}

Array spmd::run::pieceFor(const Slot &slot, const Array &global,
                          const std::vector<std::vector<int64_t>> &maps,
                          const std::vector<int64_t> &coords) {
  std::vector<int64_t> local(slot.type.getShape());
  Array piece = extractPiece(global, maps, local);
  // A zero summand: the rank's coordinate on a Partial mesh dim is not 0.
  for (auto [m, p] : llvm::enumerate(slot.placements))
    if (p.kind == layout::Placement::Kind::Partial && coords[m] != 0) {
      std::fill(piece.data.begin(), piece.data.end(), 0);
      break;
    }
  return piece;
}

static std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string spmd::run::misfit(const Slot &slot,
                              const std::vector<int64_t> &global, int32_t dtype,
                              const std::vector<int64_t> &mesh) {
  int32_t want = *dtypeOf(slot.type.getElementType());
  if (dtype != want)
    return "the program's type is " + typeString(slot.type) + ", the dtype " +
           dtypeName(dtype);
  std::vector<layout::Placement> placements = slot.placements;
  if (placements.empty())
    placements.assign(mesh.size(), layout::Placement::replicate());
  std::string why = layout::validate(global, mesh, placements);
  if (!why.empty())
    return "its layout " + layout::placementsStr(placements) +
           " does not fit the shape " + shapeStr(global) + ": " + why;
  std::vector<int64_t> local = layout::maxLocalShape(global, mesh, placements);
  if (llvm::ArrayRef<int64_t>(local) != slot.type.getShape())
    return "the program's local type " + typeString(slot.type) +
           " is not the per-rank piece " + shapeStr(local) + " of the shape " +
           shapeStr(global) + " under layout " +
           layout::placementsStr(placements);
  return "";
}

Array spmd::run::fromBuffer(const SpmdBuffer *buffer) {
  if (buffer->dtype == SPMD_BF16) {
    SpmdBuffer *wide = spmd_rt_alloc(SPMD_F32, buffer->rank, buffer->shape);
    spmd_rt_copy(wide, buffer);
    Array a = fromBuffer(wide);
    spmd_rt_free(wide);
    return a;
  }
  Array a;
  a.dtype = buffer->dtype;
  a.shape.assign(buffer->shape, buffer->shape + buffer->rank);
  a.data.resize(a.numel() * a.elementSize());
  spmd_rt_read(buffer, a.data.data());
  return a;
}

SpmdBuffer *spmd::run::toBuffer(const Array &a, int32_t dtype) {
  SpmdBuffer *b = spmd_rt_alloc(a.dtype, a.shape.size(), a.shape.data());
  spmd_rt_write(b, a.data.data());
  if (dtype == a.dtype)
    return b;
  SpmdBuffer *narrow = spmd_rt_alloc(dtype, b->rank, b->shape);
  spmd_rt_copy(narrow, b);
  spmd_rt_free(b);
  return narrow;
}

Array spmd::run::gather(const SpmdBuffer *local, const Slot &slot,
                        const std::vector<int64_t> &global,
                        const std::vector<int64_t> &mesh, bool everyRank) {
  int rank = spmd_rt_rank(), size = spmd_rt_world_size();
  Array mine = fromBuffer(local);
  int bytes = static_cast<int>(mine.data.size());
  std::vector<int> counts(size), displs(size);
  if (everyRank)
    MPI_Allgather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT,
                  MPI_COMM_WORLD);
  else
    MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0,
               MPI_COMM_WORLD);
  bool assemble = everyRank || rank == 0;
  std::vector<char> all;
  if (assemble) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[r] = total;
      total += counts[r];
    }
    all.resize(total);
  }
  if (everyRank)
    MPI_Allgatherv(mine.data.data(), bytes, MPI_BYTE, all.data(), counts.data(),
                   displs.data(), MPI_BYTE, MPI_COMM_WORLD);
  else
    MPI_Gatherv(mine.data.data(), bytes, MPI_BYTE, all.data(), counts.data(),
                displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
  Array result;
  result.dtype = mine.dtype;
  result.shape = global;
  if (!assemble)
    return result;
  result.data.assign(result.numel() * result.elementSize(), 0);
  bool partial = hasPartial(slot);
  for (int r = 0; r < size; ++r) {
    std::vector<int64_t> coords = layout::rankToCoords(r, mesh);
    Array piece = mine;
    piece.data.assign(all.begin() + displs[r],
                      all.begin() + displs[r] + counts[r]);
    auto maps = mapsFor(slot, global, mesh, coords);
    if (!partial) {
      insertPiece(result, piece, maps);
      continue;
    }
    // Summands add up along the Partial mesh dims; along a replicated one
    // the copies are equal, and coordinate 0's is the one added.
    bool copy = false;
    for (auto [m, p] : llvm::enumerate(slot.placements))
      copy |= p.kind == layout::Placement::Kind::Replicate && coords[m] != 0;
    if (!copy)
      addPiece(result, piece, maps);
  }
  return result;
}

void spmd::run::registerExecutableDialects(DialectRegistry &registry) {
  registry.insert<func::FuncDialect, arith::ArithDialect, LLVM::LLVMDialect,
                  spmd::SPMDDialect, spmd::aten::AtenDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

/// The value of a step of the JIT compilation, or the end of the job with
/// LLVM's message.
template <typename T> static T jitOrFatal(llvm::Expected<T> expected) {
  if (!expected)
    FATAL("JIT compilation failed: %s",
          llvm::toString(expected.takeError()).c_str());
  return std::move(*expected);
}

std::unique_ptr<Executable>
Executable::create(ModuleOp module, StringRef function, StringRef runtimeLib) {
  auto exe = std::make_unique<Executable>();
  exe->function = function.str();
  // The mesh and the entry function's slots, before lowering erases them.
  // Layouts name the program's (first) mesh; the runtime's groups come
  // from the refinement of every mesh (views for collectives).
  exe->mesh = {spmd_rt_world_size()};
  auto meshes = module.getOps<spmd::MeshOp>();
  StringRef meshName;
  if (!meshes.empty()) {
    spmd::MeshOp first = *meshes.begin();
    exe->mesh.assign(first.getShape().begin(), first.getShape().end());
    meshName = first.getSymName();
  }
  FailureOr<spmd::MeshRefinement> refined =
      spmd::refineMeshes(module, "spmd-run");
  if (failed(refined))
    FATAL("the program's meshes are not views of one mesh");
  if (meshes.empty())
    spmd_rt_set_mesh(exe->mesh.size(), exe->mesh.data());
  else
    spmd_rt_set_mesh(refined->shape.size(), refined->shape.data());
  auto fn = module.lookupSymbol<func::FuncOp>(function);
  if (!fn || fn.isExternal())
    FATAL("the module has no function @%s", exe->function.c_str());
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    exe->args.push_back(readSlot(fn.getArgumentTypes()[i], fn.getArgAttrDict(i),
                                 "argument", i, function, meshName));
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    exe->results.push_back(readSlot(fn.getResultTypes()[i],
                                    fn.getResultAttrDict(i), "result", i,
                                    function, meshName));

  PassManager pm(module.getContext());
  spmd::buildLowerToRuntimePipeline(pm);
  if (failed(pm.run(module)))
    FATAL("lowering @%s failed (see the diagnostics above)",
          exe->function.c_str());
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions options;
  // ExecutionEngineOptions::transformer is a function_ref: the function it
  // refers to must outlive ExecutionEngine::create.
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(2, 0, nullptr);
  options.transformer = optimize;
  llvm::SmallVector<StringRef> libs = {runtimeLib};
  options.sharedLibPaths = libs;
  // Code generation at -O0 (FastISel, the fast register allocator): the
  // step is straight-line runtime calls, which -O2's instruction scheduling
  // and register allocation do not speed up but compile in time superlinear
  // in the step's length (the 2x2 per-op matrix's 5,400-op program: 9.2 s
  // per rank at -O2, 0.5 s at -O0).
  llvm::orc::JITTargetMachineBuilder machineBuilder =
      jitOrFatal(llvm::orc::JITTargetMachineBuilder::detectHost());
  machineBuilder.setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  exe->engine = jitOrFatal(ExecutionEngine::create(
      module, options, jitOrFatal(machineBuilder.createTargetMachine())));
  return exe;
}

std::vector<SpmdBuffer *> Executable::invoke(std::vector<SpmdBuffer *> &args) {
  if (args.size() != this->args.size())
    FATAL("@%s takes %zu arguments, %zu given", function.c_str(),
          this->args.size(), args.size());
  // The lowered step is `void f(SpmdBuffer *const *arguments,
  // SpmdBuffer **results)` (spmd-pack-entry-functions).
  std::vector<SpmdBuffer *> out(this->results.size());
  SpmdBuffer **arguments = args.data();
  SpmdBuffer **results = out.data();
  void *packed[] = {&arguments, &results};
  if (llvm::Error e = engine->invokePacked(function, packed))
    FATAL("%s", llvm::toString(std::move(e)).c_str());
  return out;
}
