//===- Report.cpp - collectives and peak memory of a per-rank program -----===//
//
// --spmd-report (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <limits>
#include <map>

namespace spmd {
#define GEN_PASS_DEF_REPORTPASS
#include "spmd/Partition/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;

namespace {

struct ReportPass : spmd::impl::ReportPassBase<ReportPass> {
  using ReportPassBase::ReportPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshOp mesh = getOnlyMesh(module, "spmd-report");
    if (!mesh)
      return signalPassFailure();
    FailureOr<layout::MeshCostModel> model =
        getMeshCostModel(mesh, latency, bandwidth, "spmd-report");
    if (failed(model))
      return signalPassFailure();
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        report(fn, mesh, *model);
  }

  void report(func::FuncOp fn, MeshOp mesh,
              const layout::MeshCostModel &model) {
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
    fn.walk([&](CollectiveOpInterface op) {
      Operation *o = op.getOperation();
      auto dims = o->getAttrOfType<DenseI64ArrayAttr>("mesh_dims");
      int64_t n = 1;
      double alpha = 0, bandwidth = std::numeric_limits<double>::infinity();
      std::string names;
      for (int64_t m : dims.asArrayRef()) {
        n *= mesh.getShape()[m];
        alpha = std::max(alpha, model.latency[m]);
        bandwidth = std::min(bandwidth, model.bandwidth[m]);
        names += (names.empty() ? "" : ",") +
                 cast<StringAttr>(mesh.getNames()[m]).getValue().str();
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

    // Peak memory: arguments stay live; each result lives from its op to
    // its last use (returned values to the end); views share memory.
    int64_t arguments = 0;
    for (Type t : fn.getArgumentTypes())
      arguments += tensorBytes(t);
    SmallVector<Operation *> ops;
    DenseMap<Operation *, unsigned> order;
    fn.walk([&](Operation *op) {
      if (op != fn) {
        order[op] = ops.size();
        ops.push_back(op);
      }
    });
    std::vector<int64_t> freed(ops.size() + 1, 0);
    int64_t live = 0, peak = 0;
    for (auto [i, op] : llvm::enumerate(ops)) {
      if (!aten::isSameElementsView(op))
        for (Value v : op->getResults()) {
          int64_t bytes = tensorBytes(v.getType());
          unsigned last = i;
          for (Operation *user : v.getUsers())
            last = std::max(last, isa<func::ReturnOp>(user)
                                      ? static_cast<unsigned>(ops.size())
                                      : order.lookup(user));
          live += bytes;
          freed[last] += bytes;
        }
      peak = std::max(peak, live);
      live -= freed[i];
    }
    os << "peak memory per rank: " << arguments + peak << " bytes (arguments "
       << arguments << ", op results " << peak << ")\n";
  }
};

} // namespace
