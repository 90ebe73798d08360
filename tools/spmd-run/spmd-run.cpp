//===- spmd-run.cpp - run a per-rank program on N ranks -------------------===//
//
//   spmd-run --np N [--backend cpu|cuda] MODULE.mlir --bundle DIR [--check]
//            [--steps K] [--lr-schedule LR1,LR2,...] [--timing] [--out DIR]
//
// Each rank parses the module, reads its device mesh and the layouts of
// @train_step's arguments and results, lowers it (buildLowerToRuntimePipeline)
// and JIT-compiles it with MLIR's ExecutionEngine against the runtime
// library, loads its local piece of every argument from the bundle, and runs
// K steps, feeding each updated value (`spmd.updates`) back as the argument
// of the next step. The optimizer's hyperparameter inputs change per step as
// a scheduler would change them: the `step` argument (steps taken before
// this one) counts up from the bundle's value, the `lr` argument takes the
// k-th value of `--lr-schedule` on step k (the bundle's value without one).
// `--backend cuda` keeps every buffer on the rank's GPU
// (CUDA kernels, cuBLAS, NCCL): arguments are copied to the device once,
// results back only to be checked or written. `--check` gathers the results of
// the first step to full size on rank 0 and compares them with PyTorch's. `--np
// N` starts the N ranks under mpirun itself; `mpirun -np N spmd-run ...` works
// too. Any failure on any rank ends every rank with a message naming the rank.
//
//===----------------------------------------------------------------------===//

#include "Bundle.h"
#include "Executable.h"

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Runtime/Runtime.h"
#include "spmd/Support/MLIRSource.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <mpi.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace spmd::run;
namespace cl = llvm::cl;

/// The tool's own options: --help lists these, not the hundreds of LLVM and
/// MLIR options linked in with the JIT (they still parse, unlisted).
static cl::OptionCategory runOptions("spmd-run options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<module.mlir>"),
                                      cl::Required, cl::cat(runOptions));
static cl::opt<std::string> bundleDir("bundle", cl::desc("spmd-capture bundle"),
                                      cl::value_desc("dir"), cl::Required,
                                      cl::cat(runOptions));
static cl::opt<int> numRanks("np",
                             cl::desc("start N ranks under mpirun (default: "
                                      "the ranks of the MPI job, or 1)"),
                             cl::init(0), cl::cat(runOptions));
static cl::opt<std::string>
    backend("backend",
            cl::desc("where the program runs: cpu (default; MPI collectives) "
                     "or cuda (one GPU per rank; NCCL collectives)"),
            cl::init("cpu"), cl::cat(runOptions));
static cl::opt<bool> check("check",
                           cl::desc("compare the first step's results with "
                                    "PyTorch's (exit 1 on a mismatch)"),
                           cl::cat(runOptions));
static cl::opt<int> steps("steps", cl::desc("steps to run (default 1)"),
                          cl::init(1), cl::cat(runOptions));
static cl::list<double>
    lrSchedule("lr-schedule",
               cl::desc("the learning rate of each step, comma-separated (one "
                        "per --steps; default: the bundle's, every step)"),
               cl::CommaSeparated, cl::value_desc("lr1,lr2,..."),
               cl::cat(runOptions));
static cl::opt<bool> timing("timing",
                            cl::desc("print the median step time and the peak "
                                     "memory per rank"),
                            cl::cat(runOptions));
static cl::opt<std::string> outDir("out",
                                   cl::desc("write the gathered results of the "
                                            "last step as .npy files"),
                                   cl::value_desc("dir"), cl::cat(runOptions));
static cl::opt<double> rtol("rtol",
                            cl::desc("largest error per tensor, relative to "
                                     "its largest magnitude (default 1e-4; "
                                     "see docs/lowering.md)"),
                            cl::init(1e-4), cl::cat(runOptions));
static cl::opt<double>
    rtolBF16("rtol-bf16",
             cl::desc("--rtol for bf16 results (default 2e-2: bf16 keeps 8 "
                      "significant bits)"),
             cl::init(2e-2), cl::cat(runOptions));
static cl::opt<std::string> funcName("function", cl::desc("entry function"),
                                     cl::init("train_step"),
                                     cl::cat(runOptions));

#define FATAL(...) spmd_rt_fatal(__VA_ARGS__)

namespace {

/// `--np N` outside an MPI job: run `mpirun -np N` on this command line
/// without `--np` (as root, oversubscribing the cores, as DESIGN.md §6).
int relaunchUnderMpirun(int argc, char **argv) {
  auto mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun) {
    llvm::errs() << "spmd-run: error: mpirun not found (install openmpi-bin)\n";
    return 1;
  }
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&relaunchUnderMpirun));
  // A session directory of this job's own: Open MPI's shared one under
  // TMPDIR races when several jobs start at once ("mkdir ... File
  // exists", as lit runs tests in parallel).
  llvm::SmallString<128> session;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("spmd-run-mpi", session)) {
    llvm::errs() << "spmd-run: error: cannot create a session directory: "
                 << ec.message() << "\n";
    return 1;
  }
  std::vector<std::string> args = {*mpirun,
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--mca",
                                   "orte_tmpdir_base",
                                   session.str().str(),
                                   "-np",
                                   std::to_string(numRanks),
                                   self};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg == "--np" || arg == "-np") {
      ++i;
      continue;
    }
    if (arg.starts_with("--np=") || arg.starts_with("-np="))
      continue;
    args.push_back(arg.str());
  }
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::string error;
  int rc =
      llvm::sys::ExecuteAndWait(*mpirun, refs, std::nullopt, {}, 0, 0, &error);
  llvm::sys::fs::remove_directories(session);
  if (rc < 0)
    llvm::errs() << "spmd-run: error: " << error << "\n";
  return rc < 0 ? 1 : rc;
}

bool insideMpiJob() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

Array readBundleArray(const std::string &file) {
  llvm::SmallString<256> path(bundleDir);
  llvm::sys::path::append(path, file);
  auto array = readNpy(path.str().str());
  if (!array)
    FATAL("%s", llvm::toString(array.takeError()).c_str());
  return std::move(*array);
}

/// `file` of the bundle, checked against its manifest entry: the shape the
/// manifest gives and its dtype (bf16 values are stored widened to float32).
Array readEntryFile(const Entry &entry, const std::string &file) {
  Array array = readBundleArray(file);
  int32_t want = entry.dtype == SPMD_BF16 ? SPMD_F32 : entry.dtype;
  if (array.dtype != want)
    FATAL("'%s': %s holds dtype %s, the manifest says %s", entry.fqn.c_str(),
          file.c_str(), dtypeName(array.dtype), dtypeName(entry.dtype));
  if (array.shape != entry.shape)
    FATAL("'%s': %s holds shape %s, the manifest says %s", entry.fqn.c_str(),
          file.c_str(), shapeString(array.shape).c_str(),
          shapeString(entry.shape).c_str());
  return array;
}

/// Checks that the module's local type of `slot` is the piece the manifest's
/// global shape and dtype give under the slot's layout (padded to the
/// largest piece, as the partitioner does), so that nothing is zero-filled
/// or read past a buffer.
void checkAgainstModule(const Slot &slot, const Entry &entry,
                        const std::vector<int64_t> &mesh, const char *what) {
  std::string why = misfit(slot, entry.shape, entry.dtype, mesh);
  if (!why.empty())
    FATAL("%s '%s' of the bundle (shape %s, dtype %s): %s", what,
          entry.fqn.c_str(), shapeString(entry.shape).c_str(),
          dtypeName(entry.dtype), why.c_str());
}

/// The --out file name of each result: its FQN with every character but
/// [A-Za-z0-9_.-] and a leading '.' replaced by '_' (so no name leaves --out
/// or hides), prefixed by the result's index for all when two would clash.
std::vector<std::string> outFileNames(const std::vector<Entry> &results) {
  std::vector<std::string> names;
  llvm::StringSet<> seen;
  bool clash = false;
  for (const Entry &e : results) {
    std::string name = e.fqn;
    for (char &c : name)
      if (!llvm::isAlnum(c) && c != '_' && c != '.' && c != '-')
        c = '_';
    if (name.empty() || name.front() == '.')
      name.insert(name.begin(), '_');
    clash |= !seen.insert(name).second;
    names.push_back(name);
  }
  for (size_t i = 0; i < names.size(); ++i)
    names[i] = (clash ? std::to_string(i) + "." : "") + names[i] + ".npy";
  return names;
}

/// Prints the comparison table; returns the number of mismatches.
///
/// A floating-point result passes when its largest distance from the exact
/// answer (PyTorch's step in float64, when the bundle has it) is at most
/// rtol * max|exact| + 16 * noise, noise the tensor's fp32 rounding noise:
/// PyTorch's own fp32 distance from the exact answer, or the manifest's
/// `noise` where larger (the largest distance among spmd-capture's randomly
/// rounded draws of the step). spmd's own is another draw of it (a
/// gradient's up to 4 times PyTorch's, and its square in Adam's
/// exp_avg_sq), large only where the step amplifies noise: Adam on
/// gradients that are zero up to rounding, a ReLU whose input is within
/// rounding of zero. Without a float64
/// reference the fp32 one is the exact answer. Integer results must be equal.
///
/// A parameter that Adam updated may also differ, element by element, by
/// what Adam's normalization makes of this run's deviation in the moments
/// (its own exp_avg and exp_avg_sq results, which are checked as above):
/// lr * (|dm^| / (sqrt(v^) + eps) + |m^| |dv^| / (2 sqrt(v^) (sqrt(v^) +
/// eps)^2)), with bias-corrected m^ and v^ of the exact step: the first-order
/// error of Adam's update, doubled. An element
/// whose gradient is zero up to rounding has a v^ near eps^2, and there a
/// rounding difference turns into an update of order lr. A result that
/// passes only this way is marked "ok (adam)".
int compare(const std::vector<Array> &results, const Manifest &manifest,
            const std::vector<Slot> &slots) {
  llvm::StringMap<size_t> byFqn;
  for (size_t i = 0; i < manifest.results.size(); ++i)
    byFqn[manifest.results[i].fqn] = i;
  const OptimizerInfo &opt = manifest.optimizer;
  // The exact answer: PyTorch's float64 step where the bundle has it.
  auto exactOf = [&](const Entry &e) {
    return readBundleArray(e.fileFp64.empty() ? e.file : e.fileFp64);
  };
  // Adam's step number t of the checked step: the step argument counts the
  // steps before it.
  std::optional<double> adamStep;
  for (const Entry &a : manifest.args)
    if (a.role == "step" && !a.file.empty())
      adamStep = readBundleArray(a.file).at(0) + 1;
  // Per-element allowance of an Adam-updated parameter; empty otherwise.
  auto adamAllowance = [&](size_t i) -> std::vector<double> {
    const Entry &entry = manifest.results[i];
    auto m = byFqn.find(entry.fqn + ".exp_avg");
    auto v = byFqn.find(entry.fqn + ".exp_avg_sq");
    if ((opt.name != "adam" && opt.name != "adamw") || entry.updates < 0 ||
        m == byFqn.end() || v == byFqn.end() || !adamStep)
      return {};
    auto exact = [&](size_t k) { return exactOf(manifest.results[k]); };
    Array mExact = exact(m->second), vExact = exact(v->second);
    const Array &mGot = results[m->second], &vGot = results[v->second];
    if (mExact.numel() != results[i].numel() ||
        vExact.numel() != results[i].numel() ||
        mGot.numel() != results[i].numel() ||
        vGot.numel() != results[i].numel())
      return {};
    double t = *adamStep;
    double c1 = 1 - std::pow(opt.beta1, t), c2 = 1 - std::pow(opt.beta2, t);
    std::vector<double> allowance(results[i].numel());
    for (int64_t j = 0; j < results[i].numel(); ++j) {
      double mh = mExact.at(j) / c1, vh = std::max(vExact.at(j) / c2, 0.0);
      double dm = std::abs(mGot.at(j) - mExact.at(j)) / c1;
      double dv = std::abs(vGot.at(j) - vExact.at(j)) / c2;
      double root = std::sqrt(vh), denom = root + opt.eps;
      allowance[j] =
          2 * opt.lr *
          (dm / denom +
           (root > 0 ? std::abs(mh) * dv / (2 * root * denom * denom) : 0));
    }
    return allowance;
  };
  llvm::outs() << llvm::formatv("spmd-run: {0} results against PyTorch "
                                "({1}), rtol {2:e1}\n",
                                results.size(), bundleDir, rtol.getValue());
  llvm::outs() << llvm::formatv("  {0,-48} {1,-14} {2,-12} {3,-12} {4,-12}\n",
                                "fqn", "shape", "max abs err", "max rel err",
                                "tolerance");
  int mismatches = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const Entry &entry = manifest.results[i];
    Array want = readBundleArray(entry.file);
    Array exact = entry.fileFp64.empty() ? want : exactOf(entry);
    const Array &got = results[i];
    bool sameShape = want.shape == got.shape && exact.shape == got.shape;
    double maxAbs = 0, maxExact = 0, maxRef = 0, noise = entry.noise;
    auto dist = [](double a, double b) {
      double d = std::abs(a - b);
      return std::isnan(d) ? INFINITY : d;
    };
    for (int64_t j = 0; sameShape && j < got.numel(); ++j) {
      maxAbs = std::max(maxAbs, dist(got.at(j), want.at(j)));
      maxExact = std::max(maxExact, dist(got.at(j), exact.at(j)));
      noise = std::max(noise, dist(want.at(j), exact.at(j)));
      maxRef = std::max(maxRef, std::abs(exact.at(j)));
    }
    bool integer =
        got.dtype == SPMD_I64 || got.dtype == SPMD_I32 || got.dtype == SPMD_I1;
    bool bf16 = slots[i].type.getElementType().isBF16();
    double relative = bf16 ? rtolBF16 : rtol;
    // GPU kernels (cuDNN's among them) flush subnormal operands to zero, so
    // a difference of a few smallest normal numbers is below what they
    // resolve: the tolerance is at least 64 of them.
    double smallest = got.dtype == SPMD_F64 ? DBL_MIN : FLT_MIN;
    double tolerance =
        integer ? 0 : std::max(relative * maxRef + 16 * noise, 64 * smallest);
    bool ok = sameShape && maxExact <= tolerance, byAdam = false;
    if (sameShape && !ok && !integer) {
      std::vector<double> allowance = adamAllowance(i);
      ok = !allowance.empty();
      for (int64_t j = 0; ok && j < got.numel(); ++j)
        ok = dist(got.at(j), exact.at(j)) <= tolerance + allowance[j];
      byAdam = ok;
    }
    mismatches += !ok;
    llvm::outs() << llvm::formatv(
        "  {0,-48} {1,-14} {2,-12} {3,-12} {4,-12} {5}\n",
        slots[i].fqn.empty() ? entry.fqn : slots[i].fqn, shapeString(got.shape),
        llvm::formatv("{0:e2}", maxAbs),
        llvm::formatv("{0:e2}", maxExact / std::max(maxRef, 1e-30)),
        llvm::formatv("{0:e2}", tolerance),
        ok ? (byAdam ? "ok (adam)" : "ok")
           : (sameShape ? "MISMATCH" : "SHAPE MISMATCH"));
  }
  if (mismatches)
    llvm::outs() << "spmd-run: " << mismatches << " of " << results.size()
                 << " results do not match PyTorch\n";
  else
    llvm::outs() << "spmd-run: all " << results.size()
                 << " results match PyTorch\n";
  return mismatches;
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(runOptions);
  cl::ParseCommandLineOptions(argc, argv, "spmd-run: run a spmd program\n");
  if (numRanks > 0 && !insideMpiJob())
    return relaunchUnderMpirun(argc, argv);
  if (backend != "cpu" && backend != "cuda") {
    llvm::errs() << "spmd-run: error: unknown --backend '" << backend
                 << "' (known: cpu, cuda)\n";
    return 1;
  }
  spmd_rt_set_backend(backend.c_str());
  spmd_rt_init(&argc, &argv);
  int rank = spmd_rt_rank(), size = spmd_rt_world_size();
  if (numRanks > 0 && numRanks != size)
    FATAL("--np %d inside an MPI job of %d ranks", numRanks.getValue(), size);
  if (steps < 1)
    FATAL("--steps must be at least 1");
  if (!lrSchedule.empty() && lrSchedule.size() != static_cast<size_t>(steps))
    FATAL("--lr-schedule gives %zu learning rates for %d steps: give one per "
          "step",
          lrSchedule.size(), steps.getValue());

  DialectRegistry registry;
  registerExecutableDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    FATAL("%s", error.c_str());
  if (llvm::Error e = spmd::checkMLIRSource(input->getBuffer()))
    FATAL("%s: %s", inputFile.c_str(), llvm::toString(std::move(e)).c_str());
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    FATAL("cannot parse %s", inputFile.c_str());

  std::string runtimeLib =
      llvm::sys::path::parent_path(
          llvm::sys::path::parent_path(llvm::sys::fs::getMainExecutable(
              argv[0], reinterpret_cast<void *>(&main))))
          .str() +
      "/lib/libspmd_runtime.so";
  std::unique_ptr<Executable> exe =
      Executable::create(*module, funcName, runtimeLib);
  const std::vector<int64_t> &mesh = exe->mesh;
  std::vector<int64_t> coords = spmd::layout::rankToCoords(rank, mesh);
  const std::vector<Slot> &argSlots = exe->args, &resultSlots = exe->results;

  auto manifest = readManifest(bundleDir);
  if (!manifest)
    FATAL("%s", llvm::toString(manifest.takeError()).c_str());
  if (manifest->args.size() != argSlots.size() ||
      manifest->results.size() != resultSlots.size())
    FATAL("@%s has %zu arguments and %zu results, the bundle %zu and %zu",
          funcName.c_str(), argSlots.size(), resultSlots.size(),
          manifest->args.size(), manifest->results.size());
  for (size_t i = 0; i < argSlots.size(); ++i)
    checkAgainstModule(argSlots[i], manifest->args[i], mesh, "argument");
  for (size_t i = 0; i < resultSlots.size(); ++i) {
    if (!resultSlots[i].fqn.empty() &&
        resultSlots[i].fqn != manifest->results[i].fqn)
      FATAL("result %zu is '%s' in the module but '%s' in the bundle", i,
            resultSlots[i].fqn.c_str(), manifest->results[i].fqn.c_str());
    checkAgainstModule(resultSlots[i], manifest->results[i], mesh, "result");
  }
  spmd_rt_set_seed(manifest->seed);
  if (check)
    for (const Entry &entry : manifest->results)
      if (entry.file.empty())
        FATAL("--check: the bundle has no reference result for '%s' (it was "
              "captured with --no-reference)",
              entry.fqn.c_str());

  // Each rank's local piece of every argument.
  std::vector<SpmdBuffer *> args;
  for (size_t i = 0; i < argSlots.size(); ++i) {
    const Slot &slot = argSlots[i];
    const Entry &entry = manifest->args[i];
    if (!slot.fqn.empty() && slot.fqn != entry.fqn)
      FATAL("argument %zu is '%s' in the module but '%s' in the bundle", i,
            slot.fqn.c_str(), entry.fqn.c_str());
    if (entry.file.empty())
      FATAL("argument '%s' has no value in the bundle: it was captured with "
            "--meta (shapes only, for planning), which spmd-run cannot run",
            entry.fqn.c_str());
    // Shape and dtype agree with the manifest, and the manifest with the
    // module (checkAgainstModule): the piece fits the local type exactly.
    Array global = readEntryFile(entry, entry.file);
    int32_t dtype = *dtypeOf(slot.type.getElementType());
    args.push_back(
        toBuffer(pieceFor(slot, global,
                          mapsFor(slot, global.shape, mesh, coords), coords),
                 dtype));
  }

  // The optimizer's hyperparameter inputs: 0-dim and replicated, rewritten
  // before each step.
  std::optional<size_t> lrArg, stepArg;
  for (size_t i = 0; i < argSlots.size(); ++i) {
    const std::string &role = manifest->args[i].role;
    if (role != "lr" && role != "step")
      continue;
    if (argSlots[i].type.getRank() != 0 ||
        !argSlots[i].type.getElementType().isF32())
      FATAL("the '%s' argument '%s' has type %s: spmd-run sets a 0-dim f32 "
            "value per step",
            role.c_str(), manifest->args[i].fqn.c_str(),
            typeString(argSlots[i].type).c_str());
    (role == "lr" ? lrArg : stepArg) = i;
  }
  if (!lrSchedule.empty() && !lrArg)
    FATAL("--lr-schedule: @%s has no learning-rate argument (spmd.role = "
          "\"lr\"; capture it with this spmd-capture)",
          funcName.c_str());
  float firstStep = stepArg ? readEntryFile(manifest->args[*stepArg],
                                            manifest->args[*stepArg].file)
                                  .at(0)
                            : 0;
  auto setScalar = [&](size_t i, double value) {
    Array a;
    a.dtype = SPMD_F32;
    float v = static_cast<float>(value);
    a.data.assign(reinterpret_cast<char *>(&v),
                  reinterpret_cast<char *>(&v) + sizeof v);
    spmd_rt_free(args[i]);
    args[i] = toBuffer(a, SPMD_F32);
  };

  std::vector<double> times;
  std::vector<Array> checked;
  int mismatches = 0;
  for (int step = 0; step < steps; ++step) {
    spmd_rt_set_step(step);
    if (lrArg && !lrSchedule.empty())
      setScalar(*lrArg, lrSchedule[step]);
    if (stepArg)
      setScalar(*stepArg, firstStep + step);
    MPI_Barrier(MPI_COMM_WORLD);
    auto start = std::chrono::steady_clock::now();
    std::vector<SpmdBuffer *> results = exe->invoke(args);
    // The GPU may still be running the step the host finished issuing.
    spmd_rt_synchronize();
    MPI_Barrier(MPI_COMM_WORLD);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    bool last = step + 1 == steps;
    if ((check && step == 0) || (last && !outDir.empty())) {
      std::vector<Array> gathered;
      for (size_t i = 0; i < results.size(); ++i)
        gathered.push_back(gather(results[i], resultSlots[i],
                                  manifest->results[i].shape, mesh));
      if (check && step == 0 && rank == 0)
        mismatches = compare(gathered, *manifest, resultSlots);
      if (last && !outDir.empty() && rank == 0) {
        if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
          FATAL("--out %s: %s", outDir.c_str(), ec.message().c_str());
        std::vector<std::string> names = outFileNames(manifest->results);
        for (size_t i = 0; i < gathered.size(); ++i) {
          llvm::SmallString<256> path(outDir);
          llvm::sys::path::append(path, names[i]);
          if (llvm::Error e = writeNpy(path.str().str(), gathered[i]))
            FATAL("%s", llvm::toString(std::move(e)).c_str());
        }
      }
    }
    // Updated values become the next step's arguments.
    for (size_t i = 0; i < results.size(); ++i) {
      SpmdBuffer *buffer = results[i];
      int64_t target = resultSlots[i].updates;
      if (target >= 0 && target < static_cast<int64_t>(args.size())) {
        spmd_rt_free(args[target]);
        args[target] = buffer;
      } else {
        spmd_rt_free(buffer);
      }
    }
  }
  if (timing) {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    double median = sorted[sorted.size() / 2];
    long long peak = spmd_rt_peak_bytes(), maxPeak = 0;
    MPI_Reduce(&peak, &maxPeak, 1, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      llvm::outs() << llvm::formatv(
          "spmd-run: {0} steps on {1} ranks: median step time {2:f3} ms, "
          "peak memory {3:f2} MiB per rank (max over ranks)\n",
          steps.getValue(), size, median * 1e3, maxPeak / 1048576.0);
  }
  for (SpmdBuffer *a : args)
    spmd_rt_free(a);
  if (check && !manifest->randomOps.empty() && rank == 0 && mismatches)
    llvm::outs() << "spmd-run: note: the step draws random numbers ("
                 << llvm::join(manifest->randomOps, ", ")
                 << "); PyTorch's reference used its own generator\n";
  MPI_Bcast(&mismatches, 1, MPI_INT, 0, MPI_COMM_WORLD);
  spmd_rt_finalize();
  return mismatches ? 1 : 0;
}
