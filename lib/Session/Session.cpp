//===- Session.cpp - compile and run a training step, C API ---------------===//
//
// The C ABI of spmd-c/Session.h: rank 0 runs the pass pipeline, every rank
// lowers and JIT-compiles the same per-rank program (spmd::run::Executable)
// and keeps its pieces of the step's arguments between calls.
//
//===----------------------------------------------------------------------===//

#include "spmd-c/Session.h"

#include "Executable.h"

#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/ParallelMode.h"
#include "spmd/Parallel/Passes.h"
#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Passes.h"
#include "spmd/Support/MLIRSource.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <mpi.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

using namespace mlir;
using namespace spmd::run;

struct SpmdSession {
  MLIRContext context;
  std::string program;
  std::unique_ptr<Executable> exe;
  std::vector<SpmdBuffer *> args;    // this rank's pieces; null until set
  std::vector<bool> borrowed;        // args over the caller's memory
  std::vector<SpmdBuffer *> results; // the last step's non-update results
  // Global shapes: of each argument once set, of each result that updates
  // none (the others have their argument's).
  std::vector<std::optional<std::vector<int64_t>>> argShapes, resultShapes;
  std::string layoutText;

  explicit SpmdSession(DialectRegistry &registry) : context(registry) {}
  ~SpmdSession() {
    for (SpmdBuffer *b : args)
      spmd_rt_free(b);
    for (SpmdBuffer *b : results)
      spmd_rt_free(b);
  }
};

namespace {

int32_t fail(char *error, int64_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
int32_t fail(char *error, int64_t size, const char *format, ...) {
  if (error && size > 0) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(error, size, format, ap);
    va_end(ap);
  }
  return 1;
}

std::vector<int64_t> shapeOf(int32_t rank, const int64_t *shape) {
  return std::vector<int64_t>(shape, shape + rank);
}

/// Broadcasts `text` from rank 0 (the others' is replaced).
void broadcast(std::string &text) {
  int64_t size = text.size();
  MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  text.resize(size);
  MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD);
}

/// Rank 0's part of spmd_session_create: the per-rank program's text, or
/// the diagnostics that stopped it (`ok` false).
std::string partition(MLIRContext &context, llvm::StringRef module,
                      llvm::StringRef pipeline, bool &ok) {
  ok = false;
  if (llvm::Error e = spmd::checkMLIRSource(module))
    return "the captured module: " + llvm::toString(std::move(e));
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error ||
        diag.getSeverity() == DiagnosticSeverity::Warning) {
      os << diag.getLocation() << ": "
         << (diag.getSeverity() == DiagnosticSeverity::Error ? "error: "
                                                             : "warning: ")
         << diag << "\n";
      for (Diagnostic &note : diag.getNotes())
        os << note.getLocation() << ": note: " << note << "\n";
    }
    return success();
  });
  OwningOpRef<ModuleOp> parsed =
      parseSourceString<ModuleOp>(module, ParserConfig(&context));
  if (!parsed)
    return "the captured module does not parse:\n" + diagnostics;
  std::string parseError;
  llvm::raw_string_ostream parseErrors(parseError);
  FailureOr<OpPassManager> passes = parsePassPipeline(pipeline, parseErrors);
  if (failed(passes))
    return "pipeline '" + pipeline.str() + "': " + parseError;
  if (passes->getOpAnchorName() != ModuleOp::getOperationName())
    return "pipeline '" + pipeline.str() +
           "' is not anchored on builtin.module";
  PassManager pm(&context);
  static_cast<OpPassManager &>(pm) = *passes;
  LogicalResult result = pm.run(*parsed);
  // What passes print (spmd-report) comes before the Python side's output.
  llvm::outs().flush();
  if (failed(result))
    return diagnostics.empty() ? "the pipeline failed" : diagnostics;
  std::string text;
  llvm::raw_string_ostream out(text);
  parsed->print(out);
  ok = true;
  return text;
}

int32_t checkIndex(const SpmdSession *s, int32_t which, int32_t i, char *error,
                   int64_t size) {
  size_t n = which == 0 ? s->exe->args.size() : s->exe->results.size();
  if (which != 0 && which != 1)
    return fail(error, size, "`which` must be 0 (argument) or 1 (result)");
  if (i < 0 || static_cast<size_t>(i) >= n)
    return fail(error, size, "%s %d out of range (%zu)",
                which == 0 ? "argument" : "result", i, n);
  return 0;
}

/// Frees argument `i`'s piece and unsets it.
void unset(SpmdSession *session, size_t i) {
  spmd_rt_free(session->args[i]);
  session->args[i] = nullptr;
  session->borrowed[i] = false;
}

/// Unsets the arguments that borrow the caller's memory (only promised
/// until the run that reads them returns).
void releaseBorrowed(SpmdSession *session) {
  for (size_t i = 0; i < session->args.size(); ++i)
    if (session->borrowed[i])
      unset(session, i);
}

/// The per-dim global indices this rank holds of a value of global shape
/// `global` laid out as `slot` in `session`'s program (mapsFor).
std::vector<std::vector<int64_t>>
localMaps(const SpmdSession *session, const Slot &slot,
          const std::vector<int64_t> &global) {
  return mapsFor(
      slot, global, session->exe->mesh,
      spmd::layout::rankToCoords(spmd_rt_rank(), session->exe->mesh));
}

const char *nameOf(const Slot &slot) {
  return slot.fqn.empty() ? "(unnamed)" : slot.fqn.c_str();
}

} // namespace

extern "C" {

int32_t spmd_session_init(const char *backend, char *error,
                          int64_t error_size) {
  static std::once_flag once;
  std::string name = backend ? backend : "cpu";
  if (name != "cpu" && name != "cuda")
    return fail(error, error_size, "unknown backend '%s' (known: cpu, cuda)",
                name.c_str());
  std::call_once(once, [&] {
    spmd_rt_set_backend(name.c_str());
    spmd_rt_init(nullptr, nullptr);
  });
  if (name != spmd_rt_backend())
    return fail(error, error_size,
                "the runtime already runs on backend '%s', not '%s'",
                spmd_rt_backend(), name.c_str());
  return 0;
}

const char *spmd_session_op_names(void) {
  static std::string names = [] {
    DialectRegistry registry;
    registerExecutableDialects(registry);
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    std::string all;
    for (RegisteredOperationName op : context.getRegisteredOperations())
      all += op.getStringRef().str() + "\n";
    return all;
  }();
  return names.c_str();
}

int32_t spmd_session_rank(void) { return spmd_rt_rank(); }
int32_t spmd_session_world_size(void) { return spmd_rt_world_size(); }
void spmd_session_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

int32_t spmd_session_any(int32_t flag) {
  int32_t mine = flag != 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT32_T, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
int32_t spmd_session_same(int64_t value) {
  // max(v) == -max(-v) == min(v): one all-reduce for both.
  int64_t mine[2] = {value, -value}, all[2] = {0, 0};
  MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return all[0] == -all[1];
}
void spmd_session_finalize(void) { spmd_rt_finalize(); }

SpmdSession *spmd_session_create(const char *module, int64_t size,
                                 const char *pipeline, const char *runtime_lib,
                                 char *error, int64_t error_size) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    spmd::registerSPMDPropagatePasses();
    spmd::registerSPMDParallelPasses();
    spmd::registerBuiltinParallelModes();
    spmd::registerSPMDPartitionPasses();
    registerCanonicalizer();
    registerCSE();
  });
  DialectRegistry registry;
  registerExecutableDialects(registry);
  auto session = std::make_unique<SpmdSession>(registry);
  session->context.loadAllAvailableDialects();
  bool ok = true;
  std::string text;
  if (spmd_rt_rank() == 0)
    text = partition(session->context, llvm::StringRef(module, size), pipeline,
                     ok);
  int okFlag = ok;
  MPI_Bcast(&okFlag, 1, MPI_INT, 0, MPI_COMM_WORLD);
  broadcast(text);
  if (!okFlag) {
    fail(error, error_size, "%s", text.c_str());
    return nullptr;
  }
  session->program = text;
  OwningOpRef<ModuleOp> program =
      parseSourceString<ModuleOp>(text, ParserConfig(&session->context));
  if (!program)
    spmd_rt_fatal("the per-rank program does not parse (a bug)");
  for (auto mesh : program->getOps<spmd::MeshOp>()) {
    int64_t devices = 1;
    for (int64_t size : mesh.getShape())
      devices *= size;
    if (devices != spmd_rt_world_size()) {
      fail(error, error_size,
           "the mesh @%s has %lld devices but the job has %d ranks",
           mesh.getSymName().str().c_str(), static_cast<long long>(devices),
           spmd_rt_world_size());
      return nullptr;
    }
  }
  session->exe = Executable::create(*program, "train_step", runtime_lib);
  session->args.assign(session->exe->args.size(), nullptr);
  session->borrowed.assign(session->exe->args.size(), false);
  session->argShapes.resize(session->exe->args.size());
  session->resultShapes.resize(session->exe->results.size());
  session->results.assign(session->exe->results.size(), nullptr);
  return session.release();
}

void spmd_session_destroy(SpmdSession *session) { delete session; }

const char *spmd_session_program(const SpmdSession *session) {
  return session->program.c_str();
}

int32_t spmd_session_num_args(const SpmdSession *session) {
  return session->exe->args.size();
}

int32_t spmd_session_num_results(const SpmdSession *session) {
  return session->exe->results.size();
}

int64_t spmd_session_result_updates(const SpmdSession *session, int32_t i) {
  if (checkIndex(session, 1, i, nullptr, 0))
    return -1;
  return session->exe->results[i].updates;
}

const char *spmd_session_layout(SpmdSession *session, int32_t which,
                                int32_t i) {
  if (checkIndex(session, which, i, nullptr, 0))
    return "";
  const Slot &slot =
      which == 0 ? session->exe->args[i] : session->exe->results[i];
  std::vector<spmd::layout::Placement> placements = slot.placements;
  if (placements.empty())
    placements.assign(session->exe->mesh.size(),
                      spmd::layout::Placement::replicate());
  session->layoutText = spmd::layout::placementsStr(placements);
  return session->layoutText.c_str();
}

/// Whether the piece `maps` selects of a row-major array of shape `global`
/// is one contiguous run of it that fills `local` exactly: every dim but
/// the first whole, the first a range, no padding.
static bool isContiguousPiece(const std::vector<std::vector<int64_t>> &maps,
                              const std::vector<int64_t> &global,
                              llvm::ArrayRef<int64_t> local) {
  for (size_t d = 0; d < maps.size(); ++d) {
    if (static_cast<int64_t>(maps[d].size()) != local[d])
      return false;
    for (size_t k = 0; k < maps[d].size(); ++k)
      if (maps[d][k] !=
          (d == 0 ? maps[0].front() : 0) + static_cast<int64_t>(k))
        return false;
    if (d > 0 && local[d] != global[d])
      return false;
  }
  return true;
}

int32_t spmd_session_set_arg(SpmdSession *session, int32_t i, const void *data,
                             int32_t dtype, int32_t rank, const int64_t *shape,
                             int32_t root, int32_t borrow, char *error,
                             int64_t error_size) {
  if (checkIndex(session, 0, i, error, error_size))
    return 1;
  // A failed set leaves the argument unset, so that no run (which checks
  // every rank's arguments) uses a stale value.
  unset(session, i);
  const Slot &slot = session->exe->args[i];
  std::vector<int64_t> global = shapeOf(rank, shape);
  int32_t want = *dtypeOf(slot.type.getElementType());
  int32_t slotDtype = want == SPMD_BF16 ? SPMD_F32 : want;
  // A bf16 argument takes f32 values: misfit compares the program's dtype.
  std::string why = misfit(slot, global, dtype == slotDtype ? want : dtype,
                           session->exe->mesh);
  if (!why.empty())
    return fail(error, error_size, "argument %d '%s': %s", i, nameOf(slot),
                why.c_str());
  if (root >= spmd_rt_world_size())
    return fail(error, error_size, "root %d of a world of %d", root,
                spmd_rt_world_size());
  auto maps = localMaps(session, slot, global);
  std::vector<int64_t> local(slot.type.getShape());
  session->argShapes[i] = global;
  session->borrowed[i] = borrow && root < 0 && dtype == want &&
                         std::string(spmd_rt_backend()) == "cpu" &&
                         !hasPartial(slot) &&
                         isContiguousPiece(maps, global, local);
  if (session->borrowed[i]) {
    int64_t offset = 0;
    if (!maps.empty() && !maps[0].empty()) {
      offset = maps[0].front() * spmd_rt_dtype_size(dtype);
      for (size_t d = 1; d < global.size(); ++d)
        offset *= global[d];
    }
    session->args[i] = spmd_rt_borrow(
        want, local.size(), local.data(),
        const_cast<char *>(static_cast<const char *>(data)) + offset);
    return 0;
  }
  Array array;
  array.dtype = dtype;
  array.shape = global;
  array.data.resize(array.numel() * array.elementSize());
  if (root < 0 || spmd_rt_rank() == root)
    std::memcpy(array.data.data(), data, array.data.size());
  if (root >= 0) {
    // MPI counts are ints: large arrays go in pieces.
    constexpr size_t kChunk = size_t(1) << 30;
    for (size_t at = 0; at < array.data.size(); at += kChunk)
      MPI_Bcast(array.data.data() + at,
                static_cast<int>(std::min(kChunk, array.data.size() - at)),
                MPI_BYTE, root, MPI_COMM_WORLD);
  }
  session->args[i] = toBuffer(
      pieceFor(slot, array, maps,
               spmd::layout::rankToCoords(spmd_rt_rank(), session->exe->mesh)),
      want);
  return 0;
}

int32_t spmd_session_move_arg(SpmdSession *to, int32_t i, SpmdSession *from,
                              int32_t j, char *error, int64_t error_size) {
  if (checkIndex(to, 0, i, error, error_size) ||
      checkIndex(from, 0, j, error, error_size))
    return 1;
  const Slot &dst = to->exe->args[i], &src = from->exe->args[j];
  if (!from->args[j] || from->borrowed[j])
    return fail(error, error_size, "argument %d '%s' has no value to move", j,
                nameOf(src));
  const std::vector<int64_t> &global = *from->argShapes[j];
  int32_t dtype = *dtypeOf(src.type.getElementType());
  std::string why = misfit(dst, global, dtype, to->exe->mesh);
  if (!why.empty())
    return fail(error, error_size, "argument %d '%s': %s", i, nameOf(dst),
                why.c_str());
  unset(to, i);
  to->argShapes[i] = global;
  // The same local type and placements on the same mesh: the same piece.
  if (dst.type == src.type && dst.placements == src.placements &&
      to->exe->mesh == from->exe->mesh) {
    to->args[i] = from->args[j];
  } else {
    Array array = gather(from->args[j], src, global, from->exe->mesh,
                         /*everyRank=*/true);
    to->args[i] = toBuffer(
        pieceFor(dst, array, localMaps(to, dst, global),
                 spmd::layout::rankToCoords(spmd_rt_rank(), to->exe->mesh)),
        dtype);
    spmd_rt_free(from->args[j]);
  }
  from->args[j] = nullptr;
  from->argShapes[j].reset();
  return 0;
}

void spmd_session_unset_arg(SpmdSession *session, int32_t i) {
  if (!checkIndex(session, 0, i, nullptr, 0))
    unset(session, i);
}

int32_t spmd_session_set_result_shape(SpmdSession *session, int32_t i,
                                      int32_t rank, const int64_t *shape,
                                      char *error, int64_t error_size) {
  if (checkIndex(session, 1, i, error, error_size))
    return 1;
  const Slot &slot = session->exe->results[i];
  std::vector<int64_t> global = shapeOf(rank, shape);
  std::string why = misfit(slot, global, *dtypeOf(slot.type.getElementType()),
                           session->exe->mesh);
  if (!why.empty())
    return fail(error, error_size, "result %d '%s': %s", i, nameOf(slot),
                why.c_str());
  session->resultShapes[i] = global;
  return 0;
}

int32_t spmd_session_run(SpmdSession *session, int64_t step, char *error,
                         int64_t error_size) {
  std::string why;
  for (size_t i = 0; i < session->args.size() && why.empty(); ++i)
    if (!session->args[i])
      why = "argument " + std::to_string(i) + " '" +
            nameOf(session->exe->args[i]) + "' is not set";
  for (size_t i = 0; i < session->results.size() && why.empty(); ++i) {
    int64_t updates = session->exe->results[i].updates;
    if (updates < 0 && !session->resultShapes[i])
      why = "result " + std::to_string(i) + " '" +
            nameOf(session->exe->results[i]) + "' has no global shape";
  }
  // Every rank runs or none does: a rank that would not run (its batch did
  // not fit) must not leave the others waiting in the step's collectives.
  int ready = why.empty(), everyone = 0;
  MPI_Allreduce(&ready, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!everyone) {
    releaseBorrowed(session);
    if (!why.empty())
      return fail(error, error_size, "rank %d: %s", spmd_rt_rank(),
                  why.c_str());
    return fail(error, error_size,
                "another rank's arguments are not set (see its error)");
  }
  spmd_rt_set_step(step);
  std::vector<SpmdBuffer *> results = session->exe->invoke(session->args);
  releaseBorrowed(session);
  for (size_t i = 0; i < results.size(); ++i) {
    int64_t target = session->exe->results[i].updates;
    spmd_rt_free(session->results[i]);
    session->results[i] = nullptr;
    if (target >= 0 && target < static_cast<int64_t>(session->args.size())) {
      spmd_rt_free(session->args[target]);
      session->args[target] = results[i];
    } else {
      session->results[i] = results[i];
    }
  }
  return 0;
}

int32_t spmd_session_gather(SpmdSession *session, int32_t which, int32_t i,
                            void *out, char *error, int64_t error_size) {
  if (checkIndex(session, which, i, error, error_size))
    return 1;
  const Slot *slot;
  const SpmdBuffer *buffer;
  std::optional<std::vector<int64_t>> global;
  if (which == 0) {
    slot = &session->exe->args[i];
    buffer = session->args[i];
    global = session->argShapes[i];
  } else {
    slot = &session->exe->results[i];
    int64_t target = slot->updates;
    buffer = target >= 0 ? session->args[target] : session->results[i];
    global =
        target >= 0 ? session->argShapes[target] : session->resultShapes[i];
  }
  if (!buffer || !global)
    return fail(error, error_size, "%s %d '%s' has no value yet",
                which == 0 ? "argument" : "result", i, nameOf(*slot));
  Array array = gather(buffer, *slot, *global, session->exe->mesh,
                       /*everyRank=*/true);
  std::memcpy(out, array.data.data(), array.data.size());
  return 0;
}

int32_t spmd_session_piece(SpmdSession *session, int32_t i, int64_t *shape,
                           void *data, int64_t *indices, char *error,
                           int64_t error_size) {
  if (checkIndex(session, 0, i, error, error_size))
    return 1;
  const Slot &slot = session->exe->args[i];
  if (!session->args[i])
    return fail(error, error_size, "argument %d '%s' has no value yet", i,
                nameOf(slot));
  if (hasPartial(slot))
    return fail(error, error_size,
                "argument %d '%s' is Partial: each rank holds a summand, not "
                "a piece (gather it whole)",
                i, nameOf(slot));
  auto maps = localMaps(session, slot, *session->argShapes[i]);
  for (size_t d = 0; d < maps.size(); ++d)
    shape[d] = maps[d].size();
  if (!data || !indices)
    return 0;
  // The valid region of the (padded) local buffer: the piece as a global
  // array of the piece's own shape, read through identity maps.
  Array local = fromBuffer(session->args[i]);
  Array piece;
  piece.dtype = local.dtype;
  std::vector<std::vector<int64_t>> identity;
  for (const auto &map : maps) {
    piece.shape.push_back(map.size());
    identity.emplace_back();
    for (int64_t k = 0; k < static_cast<int64_t>(map.size()); ++k)
      identity.back().push_back(k);
  }
  piece.data.assign(piece.numel() * piece.elementSize(), 0);
  insertPiece(piece, local, identity);
  std::memcpy(data, piece.data.data(), piece.data.size());
  for (const auto &map : maps)
    indices = std::copy(map.begin(), map.end(), indices);
  return 0;
}

} // extern "C"
