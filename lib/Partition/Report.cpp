//===- Report.cpp - collectives and peak memory of a per-rank program -----===//
//
// --spmd-report (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Strategy.h"
#include "spmd/Support/JSON.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <array>
#include <functional>
#include <limits>
#include <map>

namespace spmd {
#define GEN_PASS_DEF_REPORTPASS
#include "spmd/Partition/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;

namespace {

/// A machine file (docs/performance.md, "Machine files"): the cost model's
/// numbers for one kind of device and its links.
struct Machine {
  std::string name;
  /// GEMM flop/s by result element type ("f32" required).
  llvm::StringMap<double> gemmFlops;
  /// Bytes per second of one device's memory.
  double memoryBandwidth = 0;
  /// Devices that share the fast links of one host.
  int64_t devicesPerHost = 1;
  /// One message's latency (seconds) and bandwidth (bytes per second per
  /// device, one direction) within a host and across hosts.
  double intraLatency = 0, intraBandwidth = 0, interLatency = 0,
         interBandwidth = 0;

  /// Per mesh dim of `meshShape`: the innermost dims stay within a host
  /// while the product of their sizes is at most devicesPerHost.
  layout::MeshCostModel meshModel(ArrayRef<int64_t> meshShape) const {
    layout::MeshCostModel model =
        layout::MeshCostModel::defaults(meshShape.size());
    int64_t span = 1;
    for (size_t m = meshShape.size(); m-- > 0;) {
      span *= meshShape[m];
      bool intra = span <= devicesPerHost;
      model.latency[m] = intra ? intraLatency : interLatency;
      model.bandwidth[m] = intra ? intraBandwidth : interBandwidth;
    }
    return model;
  }
};

/// Reads machine file `path`; errors name the file and the key.
llvm::Expected<Machine> loadMachine(StringRef path) {
  auto fail = [&](const Twine &why) {
    return llvm::createStringError("machine file '" + path + "': " + why);
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return fail("cannot be read: " + file.getError().message());
  llvm::Expected<llvm::json::Value> json = parseJSON((*file)->getBuffer());
  if (!json)
    return fail(llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("must be a JSON object");
  Machine machine;
  auto positive = [&](const llvm::json::Object &o, StringRef key,
                      const Twine &where, double &out) -> llvm::Error {
    std::optional<double> v = o.getNumber(key);
    if (!v || !(*v > 0))
      return fail("'" + where + key + "' must be a positive number");
    out = *v;
    return llvm::Error::success();
  };
  if (std::optional<StringRef> name = root->getString("name"))
    machine.name = name->str();
  const llvm::json::Object *gemm = root->getObject("gemm_flops");
  if (!gemm || !gemm->get("f32"))
    return fail("'gemm_flops' must be an object of flop/s by element type, "
                "with \"f32\" at least");
  for (const auto &[key, value] : *gemm) {
    double flops = 0;
    if (llvm::Error e = positive(*gemm, key, "gemm_flops.", flops))
      return std::move(e);
    machine.gemmFlops[key] = flops;
  }
  double devices = 0;
  if (llvm::Error e =
          positive(*root, "memory_bandwidth", "", machine.memoryBandwidth))
    return std::move(e);
  if (llvm::Error e = positive(*root, "devices_per_host", "", devices))
    return std::move(e);
  machine.devicesPerHost = static_cast<int64_t>(devices);
  for (auto [key, latency, bandwidth] :
       {std::make_tuple("intra_host", &machine.intraLatency,
                        &machine.intraBandwidth),
        std::make_tuple("inter_host", &machine.interLatency,
                        &machine.interBandwidth)}) {
    const llvm::json::Object *link = root->getObject(key);
    if (!link)
      return fail("'" + Twine(key) +
                  "' must be an object with 'latency' and 'bandwidth'");
    if (llvm::Error e = positive(*link, "latency", Twine(key) + ".", *latency))
      return std::move(e);
    if (llvm::Error e =
            positive(*link, "bandwidth", Twine(key) + ".", *bandwidth))
      return std::move(e);
  }
  return machine;
}

struct ReportPass : spmd::impl::ReportPassBase<ReportPass> {
  using ReportPassBase::ReportPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The program's mesh and its views (fsdp's post-forward mesh): every
    // collective is costed on the refined mesh's dims it spans.
    auto meshes = module.getOps<MeshOp>();
    if (meshes.empty()) {
      module.emitError("spmd-report needs an spmd.mesh");
      return signalPassFailure();
    }
    MeshOp mesh = *meshes.begin();
    FailureOr<MeshRefinement> refined = refineMeshes(module, "spmd-report");
    if (failed(refined))
      return signalPassFailure();
    refinement = std::move(*refined);
    std::vector<int64_t> meshShape(mesh.getShape().begin(),
                                   mesh.getShape().end());
    std::optional<CostModel> cost;
    layout::MeshCostModel model;
    if (!machine.empty()) {
      llvm::Expected<Machine> m = loadMachine(machine);
      if (!m) {
        module.emitError("spmd-report: ") << llvm::toString(m.takeError());
        return signalPassFailure();
      }
      model = m->meshModel(meshShape);
      refinedModel = m->meshModel(refinement.shape);
      cost.emplace(meshShape, model, m->gemmFlops.lookup("f32"),
                   m->memoryBandwidth);
      cost->setGemmFlops(m->gemmFlops);
      machineName = m->name.empty() ? machine : m->name;
    } else {
      FailureOr<layout::MeshCostModel> given =
          getMeshCostModel(mesh, latency, bandwidth, "spmd-report");
      if (failed(given))
        return signalPassFailure();
      model = *given;
      // A refined dim is a part of one program mesh dim and its links.
      refinedModel = layout::MeshCostModel::defaults(refinement.shape.size());
      for (auto [m, span] :
           llvm::enumerate(refinement.spans[mesh.getSymName()]))
        for (int64_t r : span) {
          refinedModel.latency[r] = model.latency[m];
          refinedModel.bandwidth[r] = model.bandwidth[m];
        }
      cost.emplace(meshShape, model, flops, memoryBandwidth);
    }
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        report(fn, mesh, *cost);
  }

  /// The machine file's name, printed with the estimated step.
  std::string machineName;
  /// The meshes as views of the refined mesh, and its cost model.
  MeshRefinement refinement;
  layout::MeshCostModel refinedModel;

  /// Seconds of `op` on one rank (its types are local: every operand and
  /// result replicated), 0 for ops that are not aten ops.
  static double computeSeconds(Operation *op, CostModel &cost,
                               size_t meshRank) {
    if (!isa<aten::AtenDialect>(op->getDialect()) ||
        !llvm::all_of(op->getOperandTypes(), llvm::IsaPred<RankedTensorType>) ||
        !llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
      return 0;
    MeshStrategy local;
    local.operands.assign(op->getNumOperands(), replicated(meshRank));
    local.results.assign(op->getNumResults(), replicated(meshRank));
    return cost.compute(op, local);
  }

  void report(func::FuncOp fn, MeshOp mesh, CostModel &cost) {
    llvm::raw_ostream &os = llvm::outs();
    os << "spmd-report: @" << fn.getSymName() << " on @" << mesh.getSymName()
       << " [";
    llvm::interleaveComma(mesh.getShape(), os);
    os << "]\n";
    os << llvm::format("%-4s %-15s %-10s %-10s %12s %10s  %s\n", "#",
                       "collective", "phase", "mesh dims", "bytes/rank",
                       "est. us", "reason");
    std::map<std::string, std::pair<int64_t, int64_t>> perKind;
    int64_t count = 0, totalBytes = 0;
    double totalSeconds = 0;
    DenseMap<Operation *, std::pair<int64_t, double>> rows; // number, seconds
    fn.walk([&](CollectiveOpInterface op) {
      Operation *o = op.getOperation();
      MeshOp own = lookupMesh(o, op.getMeshAttr(), nullptr);
      int64_t n = 1;
      double alpha = 0, bandwidth = std::numeric_limits<double>::infinity();
      std::string names;
      for (int64_t m : op.getMeshDims()) {
        n *= own.getShape()[m];
        names += (names.empty() ? "" : ",") +
                 cast<StringAttr>(own.getNames()[m]).getValue().str();
      }
      for (int64_t r : refinement.refine(own.getSymName(), op.getMeshDims())) {
        alpha = std::max(alpha, refinedModel.latency[r]);
        bandwidth = std::min(bandwidth, refinedModel.bandwidth[r]);
      }
      int64_t bytes = std::max(tensorBytes(o->getOperand(0).getType()),
                               tensorBytes(o->getResult(0).getType()));
      using Kind = layout::RedistributeStep::Kind;
      // A broadcast moves the whole buffer: as an all_gather of n pieces of
      // its size.
      Kind kind = isa<AllReduceOp>(o)       ? Kind::AllReduce
                  : isa<ReduceScatterOp>(o) ? Kind::ReduceScatter
                  : isa<AllToAllOp>(o)      ? Kind::AllToAll
                                            : Kind::AllGather;
      int64_t large = isa<BroadcastOp>(o) ? bytes * n : bytes;
      double seconds =
          layout::collectiveCost(kind, n, large, alpha, bandwidth).second;
      std::string name = o->getName().stripDialect().str();
      auto reason = o->getAttrOfType<StringAttr>("spmd.reason");
      StringRef phase = getPhase(o);
      os << llvm::format("%-4lld %-15s %-10s %-10s %12lld %10.2f  %s\n",
                         static_cast<long long>(++count), name.c_str(),
                         phase.empty() ? "-" : phase.str().c_str(),
                         ("[" + names + "]").c_str(),
                         static_cast<long long>(bytes), seconds * 1e6,
                         reason ? reason.getValue().str().c_str() : "-");
      rows[o] = {count, seconds};
      perKind[name].first += 1;
      perKind[name].second += bytes;
      totalBytes += bytes;
      totalSeconds += seconds;
    });
    for (auto &[kind, entry] : perKind)
      os << "total " << kind << ": " << entry.first << " collectives, "
         << entry.second << " bytes/rank\n";
    os << "total per step: " << count << " collectives, " << totalBytes
       << " bytes/rank, " << llvm::format("%.2f", totalSeconds * 1e6)
       << " us estimated\n";
    reportOverlap(fn, rows, cost, mesh.getShape().size());

    PeakMemory memory = predictPeakMemory(fn);
    os << "peak memory per rank: " << memory.total() << " bytes (arguments "
       << memory.arguments() << ", op results " << memory.results() << ")\n";
    os << "at the peak: parameters " << memory.parameters
       << ", optimizer state " << memory.optimizerState
       << ", carried gradients " << memory.carriedGradients
       << ", other arguments " << memory.otherArguments
       << ", gathered parameters " << memory.gatheredParameters
       << ", forward results (activations) " << memory.forward
       << ", backward results (gradients) " << memory.backward
       << ", optimizer results " << memory.update << ", other results "
       << memory.other << " bytes\n";
  }

  /// The overlap rows: each asynchronous collective with the ops that run
  /// while it is in flight; then the step under a timeline where compute
  /// runs in program order and the collectives one after another on one
  /// link, each starting when issued and the link is free: what a wait
  /// stalls is exposed communication.
  void
  reportOverlap(func::FuncOp fn,
                const DenseMap<Operation *, std::pair<int64_t, double>> &rows,
                CostModel &cost, size_t meshRank) {
    llvm::raw_ostream &os = llvm::outs();
    double now = 0, linkFree = 0, compute = 0, exposed = 0;
    struct InFlight {
      double done;
      int64_t ops = 0;
      StringRef first, last;
    };
    DenseMap<Operation *, InFlight> inFlight; // by collective
    SmallVector<std::string> lines;
    for (Operation &op : fn.getBody().front()) {
      if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
        double start = std::max(now, linkFree);
        linkFree = start + rows.lookup(&op).second;
        if (WaitOp::getCompletingWait(collective)) {
          inFlight[&op] = {linkFree};
        } else {
          exposed += linkFree - now;
          now = linkFree;
        }
        continue;
      }
      if (auto wait = dyn_cast<WaitOp>(op)) {
        auto found = inFlight.find(wait.getCollective());
        if (found == inFlight.end() ||
            WaitOp::getCompletingWait(wait.getCollective()) != wait)
          continue;
        InFlight &f = found->second;
        double stall = std::max(0.0, f.done - now);
        exposed += stall;
        now += stall;
        auto [number, seconds] = rows.lookup(wait.getCollective());
        std::string with = "nothing";
        if (f.ops != 0)
          with = f.last.empty() ? llvm::formatv("{0} ops", f.ops).str()
                                : llvm::formatv("{0} ops, {1} .. {2}", f.ops,
                                                f.first, f.last)
                                      .str();
        lines.push_back(
            llvm::formatv("{0,-4} {1,-15} {2,10:F2} {3,10:F2}  {4}", number,
                          wait.getCollective()->getName().stripDialect().str(),
                          std::max(0.0, seconds - stall) * 1e6, stall * 1e6,
                          with)
                .str());
        inFlight.erase(found);
        continue;
      }
      double seconds = computeSeconds(&op, cost, meshRank);
      now += seconds;
      compute += seconds;
      for (auto &entry : inFlight) {
        InFlight &f = entry.second;
        ++f.ops;
        StringRef fqn = getModuleFqn(&op);
        if (fqn.empty())
          continue;
        if (f.first.empty())
          f.first = fqn;
        f.last = fqn;
      }
    }
    if (!lines.empty()) {
      os << "overlap (asynchronous collectives, spmd.wait):\n"
         << llvm::format("%-4s %-15s %10s %10s  %s\n", "#", "collective",
                         "hidden us", "exposed us", "in flight during");
      for (const std::string &line : lines)
        os << line << "\n";
    }
    if (!machineName.empty())
      os << "machine: " << machineName << "\n";
    os << llvm::format("estimated step: %.2f us (compute %.2f us, exposed "
                       "communication %.2f us)\n",
                       now * 1e6, compute * 1e6, exposed * 1e6);
  }
};

} // namespace

PeakMemory spmd::predictPeakMemory(func::FuncOp fn) {
  // Peak memory: arguments stay live; each result lives from its op to
  // its last use (returned values to the end); views share memory.
  // What is live at the peak, by kind: arguments by their spmd.role, op
  // results by their spmd.phase.
  enum Kind {
    Params,
    OptimState,
    CarriedGrads,
    OtherArgs,
    Gathered,
    Forward,
    Backward,
    Update,
    Other
  };
  constexpr int numKinds = Other + 1;
  using Bytes = std::array<int64_t, numKinds>;
  Bytes argBytes{};
  // Parameters and the values that only move them (Gathered).
  DenseSet<Value> parameterData;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto role = fn.getArgAttrOfType<StringAttr>(i, "spmd.role");
    Kind kind = !role                              ? OtherArgs
                : role.getValue() == "param"       ? Params
                : role.getValue() == "optim_state" ? OptimState
                : role.getValue() == "grad"        ? CarriedGrads
                                                   : OtherArgs;
    argBytes[kind] += tensorBytes(fn.getArgumentTypes()[i]);
    if (kind == Params)
      parameterData.insert(fn.getArgument(i));
  }
  auto movesParameters = [&](Operation *op) {
    return (isa<AllGatherOp, LocalTakeOp, WaitOp, aten::ToCopyOp, aten::CatOp,
                aten::SliceTensorOp, aten::SplitWithSizesOp>(op) ||
            aten::isRearrangement(op)) &&
           op->getNumOperands() > 0 &&
           llvm::all_of(op->getOperands(),
                        [&](Value v) { return parameterData.contains(v); });
  };
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> order;
  fn.walk([&](Operation *op) {
    if (op != fn) {
      order[op] = ops.size();
      ops.push_back(op);
    }
  });
  // A view's or a wait's result shares its operand's buffer, which lives
  // as long as either; an asynchronous collective reads its input until
  // its wait.
  std::function<unsigned(Value, unsigned)> lastUse = [&](Value v,
                                                         unsigned last) {
    for (Operation *user : v.getUsers()) {
      if (isa<func::ReturnOp>(user))
        return static_cast<unsigned>(ops.size());
      last = std::max(last, order.lookup(user));
      if (isa<WaitOp>(user) || aten::isSameElementsView(user))
        last = lastUse(user->getResult(0), last);
      if (auto collective = dyn_cast<CollectiveOpInterface>(user))
        if (WaitOp wait = WaitOp::getCompletingWait(collective))
          last = std::max(last, order.lookup(wait));
    }
    return last;
  };
  std::vector<Bytes> freed(ops.size() + 1, Bytes{});
  Bytes live{}, atPeak{};
  int64_t liveTotal = 0, peak = 0;
  for (auto [i, op] : llvm::enumerate(ops)) {
    StringRef phase = getPhase(op);
    Kind kind = phase == "forward" || phase == "loss" ? Forward
                : phase == "backward"                 ? Backward
                : phase == "optimizer"                ? Update
                                                      : Other;
    if (movesParameters(op)) {
      kind = Gathered;
      parameterData.insert(op->getResults().begin(), op->getResults().end());
    }
    if (!aten::isSameElementsView(op) && !isa<WaitOp>(op))
      for (OpResult v : op->getResults()) {
        if (aten::isUncomputedResult(v))
          continue;
        int64_t bytes = tensorBytes(v.getType());
        live[kind] += bytes;
        liveTotal += bytes;
        freed[lastUse(v, i)][kind] += bytes;
      }
    if (liveTotal > peak) {
      peak = liveTotal;
      atPeak = live;
    }
    for (int k = 0; k < numKinds; ++k) {
      live[k] -= freed[i][k];
      liveTotal -= freed[i][k];
    }
  }
  PeakMemory memory;
  memory.parameters = argBytes[Params];
  memory.optimizerState = argBytes[OptimState];
  memory.carriedGradients = argBytes[CarriedGrads];
  memory.otherArguments = argBytes[OtherArgs];
  memory.gatheredParameters = atPeak[Gathered];
  memory.forward = atPeak[Forward];
  memory.backward = atPeak[Backward];
  memory.update = atPeak[Update];
  memory.other = atPeak[Other];
  return memory;
}
