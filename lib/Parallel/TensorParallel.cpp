//===- TensorParallel.cpp - TP plans and ParallelStyles -------------------===//

#include "spmd/Parallel/TensorParallel.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/ParallelMode.h"
#include "spmd/Propagate/Strategy.h"
#include "spmd/Support/JSON.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace spmd;
using layout::Placement;
using Style = TPPlanEntry::Style;

namespace {

/// "shard(-1)", "Shard(0)", "strided_shard<0, 3>", "replicate",
/// "Replicate()", "partial", "partial(sum)".
std::optional<Placement> parsePlanPlacement(StringRef text) {
  std::string s = StringRef(text).trim().lower();
  llvm::erase(s, ' ');
  StringRef body(s);
  std::string name;
  SmallVector<StringRef> args;
  size_t open = body.find_first_of("(<");
  if (open == StringRef::npos) {
    name = body.str();
  } else {
    char close = body[open] == '(' ? ')' : '>';
    if (body.back() != close)
      return std::nullopt;
    name = body.take_front(open).str();
    StringRef inner = body.drop_front(open + 1).drop_back();
    if (!inner.empty())
      inner.split(args, ',');
  }
  SmallVector<int64_t> ints;
  if (name != "partial")
    for (StringRef a : args) {
      int64_t v;
      if (a.getAsInteger(10, v))
        return std::nullopt;
      ints.push_back(v);
    }
  if (name == "replicate" && args.empty())
    return Placement::replicate();
  if (name == "shard" && ints.size() == 1)
    return Placement::shard(ints[0]);
  if ((name == "strided_shard" || name == "_stridedshard") &&
      ints.size() == 2 && ints[1] >= 1)
    return Placement::stridedShard(ints[0], ints[1]);
  if (name == "partial" && args.size() <= 1)
    if (std::optional<ReduceKind> kind =
            symbolizeReduceKind(args.empty() ? "sum" : args[0]))
      return Placement::partial(toLayoutReduceKind(*kind));
  return std::nullopt;
}

/// `p` with a negative (Python-style) shard dim counted from `rank`.
Placement normalized(Placement p, int64_t rank) {
  if (p.isShardLike())
    p.dim = aten::normalizeDim(p.dim, rank);
  return p;
}

/// The view that flattened `v`'s leading dims out of a higher-rank tensor,
/// found upstream through the ops that keep `v`'s rows (operands with `v`'s
/// dim-0 size: the norm, the projections and activations of OPT's MLP,
/// which runs on [B·S, H] flattened from [B, S, H]), and the number of
/// source dims merged into dim 0. A view that does not flatten ends the
/// search; so does a distance of 32 ops.
std::optional<std::pair<Operation *, int64_t>> flatteningView(Value v) {
  auto rowsOf = [](Value x) {
    auto t = dyn_cast<RankedTensorType>(x.getType());
    return t && t.getRank() > 0 ? t.getDimSize(0) : int64_t(-1);
  };
  int64_t rows = rowsOf(v);
  SmallVector<Value> work = {v};
  llvm::SmallPtrSet<Operation *, 32> seen;
  while (!work.empty() && seen.size() < 32) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second || op->getNumOperands() == 0)
      continue;
    if (aten::isSameElementsView(op)) {
      auto from = cast<RankedTensorType>(op->getOperand(0).getType());
      auto to = cast<RankedTensorType>(op->getResult(0).getType());
      int64_t merged = 0, product = 1;
      while (merged < from.getRank() && product < to.getDimSize(0))
        product *= from.getDimSize(merged++);
      if (from.getRank() > to.getRank() && merged > 1 &&
          product == to.getDimSize(0) &&
          from.getShape().drop_front(merged) == to.getShape().drop_front())
        return std::make_pair(op, merged);
      continue;
    }
    for (Value operand : op->getOperands())
      if (rowsOf(operand) == rows)
        work.push_back(operand);
  }
  return std::nullopt;
}

/// A plan's Shard(d), d >= 0, for a value a view flattened (flatteningView)
/// counts d in the unflattened tensor's dims, as the model's code does: on
/// OPT's [B·S, H], Shard(1) is the sequence, StridedShard(0, B) of the
/// flattened value (DTensor's view rule). Negative dims, and values no view
/// flattened, keep their meaning.
Placement unflattened(Value v, Placement p) {
  if (p.kind != Placement::Kind::Shard || p.dim <= 0)
    return p;
  auto found = flatteningView(v);
  if (!found)
    return p;
  auto from = cast<RankedTensorType>(found->first->getOperand(0).getType());
  int64_t merged = found->second;
  if (p.dim >= from.getRank())
    return p;
  if (p.dim >= merged)
    return Placement::shard(p.dim - merged + 1);
  int64_t outer = 1;
  for (int64_t d = 0; d < p.dim; ++d)
    outer *= from.getDimSize(d);
  return Placement::stridedShard(0, outer);
}

StringRef styleName(Style style) {
  switch (style) {
  case Style::Placements:
    return "placements";
  case Style::Colwise:
    return "colwise";
  case Style::Rowwise:
    return "rowwise";
  case Style::SequenceParallel:
    return "sequence_parallel";
  case Style::PrepareModuleInput:
    return "prepare_module_input";
  case Style::PrepareModuleOutput:
    return "prepare_module_output";
  }
  llvm_unreachable("unknown style");
}

} // namespace

FailureOr<TPPlan> spmd::parseTPPlan(ModuleOp module, StringRef path) {
  auto fail = [&](const Twine &what) {
    return emitError(module.getLoc(), "TP plan '") << path << "': " << what;
  };
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return fail("cannot be read: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> json = parseJSON((*buffer)->getBuffer());
  if (!json)
    return fail("is not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return fail("must be a JSON object mapping FQN patterns to styles");
  if (root->empty())
    return fail("has no entries: a TP plan maps at least one module FQN "
                "pattern to a style (or a parameter to placements)");
  // llvm::json::Object is unordered: the plan applies in file order, so the
  // keys are taken from the text.
  std::vector<std::string> keys;
  for (auto &entry : *root)
    keys.push_back(entry.first.str());
  StringRef text = (*buffer)->getBuffer();
  llvm::sort(keys, [&](const std::string &a, const std::string &b) {
    return text.find("\"" + a + "\"") < text.find("\"" + b + "\"");
  });

  TPPlan plan;
  for (const std::string &key : keys) {
    auto bad = [&](const Twine &what) {
      return fail("entry '" + key + "': " + what);
    };
    const llvm::json::Object *spec = root->getObject(key);
    if (!spec)
      return bad("must be an object with \"style\" or \"placements\"");
    SmallVector<StringRef> components;
    StringRef(key).split(components, '.');
    for (StringRef c : components)
      if (llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(c);
          !glob)
        return bad("pattern component '" + c +
                   "' is malformed: " + llvm::toString(glob.takeError()));
    TPPlanEntry entry;
    entry.pattern = key;
    std::optional<TPPlanEntry> outputEntry;
    // One layout, or a list of layouts and nulls (prepare_*).
    auto layouts =
        [&](StringRef name, bool list,
            std::vector<std::optional<Placement>> &out) -> LogicalResult {
      const llvm::json::Value *v = spec->get(name);
      if (!v)
        return success();
      auto one = [&](const llvm::json::Value &item) -> LogicalResult {
        if (item.kind() == llvm::json::Value::Null && list) {
          out.push_back(std::nullopt);
          return success();
        }
        std::optional<StringRef> s = item.getAsString();
        std::optional<Placement> p = s ? parsePlanPlacement(*s) : std::nullopt;
        if (!p)
          return bad("'" + name +
                     "' needs a placement such as \"shard(-1)\", "
                     "\"replicate\" or \"strided_shard(0, 3)\"" +
                     (list ? " (or null)" : ""));
        out.push_back(*p);
        return success();
      };
      const llvm::json::Array *array = v->getAsArray();
      // A parameter's placements are a list, as DTensor's distribute_tensor
      // takes them: one placement per mesh dim.
      if (!array && name == "placements")
        return bad("'placements' must be a list holding one placement, e.g. "
                   "[\"shard(0)\"]");
      if (array) {
        if (!list && array->size() != 1)
          return bad("'" + name + "' takes one placement");
        for (const llvm::json::Value &item : *array)
          if (failed(one(item)))
            return failure();
        return success();
      }
      return one(*v);
    };

    const llvm::json::Value *placements = spec->get("placements");
    std::optional<StringRef> style = spec->getString("style");
    if (spec->get("style") && !style)
      return bad("\"style\" must be a string");
    if (placements && style)
      return bad("gives both \"style\" and \"placements\"");
    SmallVector<StringRef> allowed;
    if (placements) {
      std::vector<std::optional<Placement>> list;
      if (failed(layouts("placements", false, list)))
        return failure();
      entry.style = Style::Placements;
      entry.placement = *list.front();
      allowed = {"placements"};
    } else if (!style) {
      return bad("needs \"style\" (colwise, rowwise, sequence_parallel, "
                 "prepare_module_input, prepare_module_output, "
                 "prepare_module_input_output) or \"placements\"");
    } else if (*style == "colwise" || *style == "rowwise") {
      entry.style = *style == "colwise" ? Style::Colwise : Style::Rowwise;
      allowed = {"input_layouts", "output_layouts", "use_local_output"};
      if (failed(layouts("input_layouts", false, entry.inputLayouts)) ||
          failed(layouts("output_layouts", false, entry.outputLayouts)))
        return failure();
    } else if (*style == "sequence_parallel") {
      entry.style = Style::SequenceParallel;
      allowed = {"sequence_dim", "use_local_output"};
      if (const llvm::json::Value *v = spec->get("sequence_dim")) {
        std::optional<int64_t> dim = v->getAsInteger();
        if (!dim)
          return bad("'sequence_dim' must be an integer");
        entry.sequenceDim = *dim;
      }
    } else if (*style == "prepare_module_input" ||
               *style == "prepare_module_output" ||
               *style == "prepare_module_input_output") {
      // DTensor's PrepareModuleInputOutput is both styles on one module:
      // two entries of the same pattern.
      bool in = *style != "prepare_module_output",
           out = *style != "prepare_module_input";
      entry.style = in ? Style::PrepareModuleInput : Style::PrepareModuleOutput;
      allowed = {"use_local_output"};
      if (in) {
        allowed.append({"input_layouts", "desired_input_layouts"});
        if (failed(layouts("input_layouts", true, entry.inputLayouts)) ||
            failed(layouts("desired_input_layouts", true,
                           entry.desiredInputLayouts)))
          return failure();
        if (entry.inputLayouts.size() != entry.desiredInputLayouts.size())
          return bad("input_layouts and desired_input_layouts need the same "
                     "length (seed 002)");
      }
      if (out) {
        allowed.append({"output_layouts", "desired_output_layouts"});
        TPPlanEntry &o = in ? outputEntry.emplace() : entry;
        o.pattern = key;
        o.style = Style::PrepareModuleOutput;
        if (failed(layouts("output_layouts", true, o.outputLayouts)) ||
            failed(layouts("desired_output_layouts", true,
                           o.desiredOutputLayouts)))
          return failure();
        if (o.outputLayouts.size() != o.desiredOutputLayouts.size() ||
            o.outputLayouts.empty())
          return bad("output_layouts and desired_output_layouts are "
                     "required and need the same length (seed 002)");
      }
    } else {
      return bad("unknown style '" + *style +
                 "' (colwise, rowwise, sequence_parallel, "
                 "prepare_module_input, prepare_module_output, "
                 "prepare_module_input_output)");
    }
    for (auto &kv : *spec) {
      StringRef k = kv.first;
      if (k != "style" && !llvm::is_contained(allowed, k))
        return bad("'" + k + "' is not a keyword of " +
                   (style ? *style : styleName(entry.style)));
    }
    // Accepted for seed 002's signature: whole-graph compilation keeps
    // values global, so a local output and a DTensor output are the same
    // program.
    if (const llvm::json::Value *v = spec->get("use_local_output"))
      if (!v->getAsBoolean())
        return bad("'use_local_output' must be true or false");
    plan.entries.push_back(std::move(entry));
    if (outputEntry)
      plan.entries.push_back(std::move(*outputEntry));
  }
  return plan;
}

namespace {

/// The class names (the class and its bases) of each module of a capture.
llvm::StringMap<SmallVector<StringRef>> moduleClasses(DictionaryAttr modules) {
  llvm::StringMap<SmallVector<StringRef>> out;
  for (NamedAttribute m : modules) {
    SmallVector<StringRef> &classes = out[m.getName().getValue()];
    if (auto info = dyn_cast<DictionaryAttr>(m.getValue()))
      if (auto list = info.getAs<ArrayAttr>("classes"))
        for (Attribute c : list)
          if (auto s = dyn_cast<StringAttr>(c))
            classes.push_back(s.getValue());
  }
  return out;
}

bool isA(ArrayRef<StringRef> classes, StringRef name) {
  return llvm::is_contained(classes, name);
}

/// `fqn` is `module` or lies inside it.
bool within(StringRef fqn, StringRef module) {
  return module.empty() || fqn == module ||
         (fqn.starts_with(module) && fqn.size() > module.size() &&
          fqn[module.size()] == '.');
}

/// How many equal pieces the output features of the projection whose
/// weight is argument `weight` are split into, or 1: a packed projection
/// (GPT-2's c_attn, q|k|v; Mamba's in_proj, x|gate) feeds a matrix product
/// whose result, through same-elements views that keep the features last
/// and through permutations (which move the features' dim), is split into
/// k equal pieces along the features' dim. Colwise on it must shard each
/// piece (StridedShard(d, k)), as Megatron does, or the pieces would be
/// redistributed in every layer.
int64_t packedPieces(func::FuncOp fn, BlockArgument weight) {
  SmallVector<Value> work = {weight};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (Operation *user : v.getUsers()) {
      if (getPhase(user) != "forward" || user->getNumResults() != 1)
        continue;
      if (user->hasTrait<aten::OpTrait::Rearrangement>() &&
          !user->hasTrait<aten::OpTrait::Split>()) {
        if (!user->hasTrait<aten::OpTrait::MatrixProduct>())
          work.push_back(user->getResult(0));
        continue;
      }
      if (!user->hasTrait<aten::OpTrait::MatrixProduct>())
        continue;
      // The product's output features (value, dim), through views and
      // permutations.
      Value product = user->getResult(0);
      SmallVector<std::pair<Value, int64_t>> outs = {
          {product, cast<RankedTensorType>(product.getType()).getRank() - 1}};
      while (!outs.empty()) {
        auto [o, features] = outs.pop_back_val();
        auto in = cast<RankedTensorType>(o.getType());
        for (Operation *next : o.getUsers()) {
          if (auto permute = dyn_cast<aten::PermutationOpInterface>(next)) {
            SmallVector<int64_t> perm = permute.getPermutation();
            auto *to = llvm::find(perm, features);
            if (to != perm.end())
              outs.push_back({next->getResult(0), to - perm.begin()});
            continue;
          }
          if (next->hasTrait<aten::OpTrait::SameElementsView>() &&
              !next->hasTrait<aten::OpTrait::Split>()) {
            auto out = cast<RankedTensorType>(next->getResult(0).getType());
            if (features == in.getRank() - 1 && out.getRank() > 0 &&
                out.getShape().back() == in.getShape().back())
              outs.push_back({next->getResult(0), out.getRank() - 1});
            continue;
          }
          if (!next->hasTrait<aten::OpTrait::Split>())
            continue;
          auto pieces = next->getResultTypes();
          bool equal =
              pieces.size() > 1 && llvm::all_of(pieces, [&](Type t) {
                auto piece = cast<RankedTensorType>(t);
                if (piece.getRank() != in.getRank() ||
                    piece.getDimSize(features) * int64_t(pieces.size()) !=
                        in.getDimSize(features))
                  return false;
                for (int64_t d = 0; d < in.getRank(); ++d)
                  if (d != features && piece.getDimSize(d) != in.getDimSize(d))
                    return false;
                return true;
              });
          if (equal)
            return static_cast<int64_t>(pieces.size());
        }
      }
    }
  }
  return 1;
}

} // namespace

FailureOr<TPResolution> spmd::resolveTPPlan(func::FuncOp fn, const TPPlan &plan,
                                            int64_t tpSize) {
  auto modulesAttr = fn->getAttrOfType<DictionaryAttr>("spmd.modules");
  if (!modulesAttr)
    return emitError(fn.getLoc(),
                     "a TP plan needs the module types of the captured "
                     "step (spmd.modules): recapture it with spmd-capture");
  llvm::StringMap<SmallVector<StringRef>> classes = moduleClasses(modulesAttr);
  std::vector<std::string> moduleNames;
  for (auto &m : classes)
    moduleNames.push_back(m.getKey().str());
  llvm::sort(moduleNames);
  // Parameters: FQN -> argument index.
  llvm::StringMap<unsigned> params;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (getArgRole(fn, i) == "param")
      params[getArgFqn(fn, i)] = i;

  TPResolution out;
  llvm::StringMap<std::string> setBy; // param -> entry pattern
  auto assign = [&](StringRef param, Placement p,
                    const TPPlanEntry &entry) -> LogicalResult {
    auto type = cast<RankedTensorType>(fn.getArgumentTypes()[params[param]]);
    p = normalized(p, type.getRank());
    std::string why = layout::validate(shapeOf(type), {tpSize}, {p});
    // A parameter is a whole value: Partial would say each rank holds a
    // summand. A split factor beyond the dim's size cuts empty pieces.
    if (why.empty() && p.kind == Placement::Kind::Partial)
      why = "a parameter holds its value, not a summand of it (Partial is "
            "what reductions produce)";
    if (why.empty() && p.kind == Placement::Kind::StridedShard &&
        p.splitFactor > type.getDimSize(p.dim))
      why = "split factor " + std::to_string(p.splitFactor) +
            " exceeds the size " + std::to_string(type.getDimSize(p.dim)) +
            " of dim " + std::to_string(p.dim);
    Location at = fn.getArgument(params[param]).getLoc();
    if (!why.empty())
      return emitError(at, "TP plan entry '")
             << entry.pattern << "': parameter '" << param << "' cannot take "
             << p.str() << ": " << why;
    auto it = out.placements.find(param);
    if (it != out.placements.end() && it->second != p)
      return emitError(at, "TP plan entries '")
             << setBy[param] << "' and '" << entry.pattern
             << "' conflict: parameter '" << param << "' gets "
             << it->second.str() << " and " << p.str();
    out.placements[param] = p;
    setBy[param] = entry.pattern;
    return success();
  };

  for (const TPPlanEntry &entry : plan.entries) {
    if (entry.style == Style::Placements) {
      bool any = false;
      for (auto &p : params)
        if (matchFqn(entry.pattern, p.getKey())) {
          any = true;
          if (failed(assign(p.getKey(), entry.placement, entry)))
            return failure();
        }
      if (!any)
        return emitError(fn.getLoc(), "TP plan entry '")
               << entry.pattern << "' names no parameter of the step";
      continue;
    }
    SmallVector<std::string> matched;
    for (const std::string &m : moduleNames)
      if (matchFqn(entry.pattern, m))
        matched.push_back(m);
    if (matched.empty())
      return emitError(fn.getLoc(), "TP plan entry '")
             << entry.pattern << "' names no module of the step";
    for (const std::string &m : matched) {
      ArrayRef<StringRef> cls = classes[m];
      std::string kind = cls.empty() ? "module" : cls.front().str();
      // One partitioning style per module; prepare_module_input and
      // _output may come on top, once each.
      bool prepare = entry.style == Style::PrepareModuleInput ||
                     entry.style == Style::PrepareModuleOutput;
      for (const TPStyledModule &other : out.styled) {
        Style style = other.entry->style;
        bool otherPrepare = style == Style::PrepareModuleInput ||
                            style == Style::PrepareModuleOutput;
        if (other.fqn == m && (prepare ? style == entry.style : !otherPrepare))
          return emitError(fn.getLoc(), "TP plan entries '")
                 << other.entry->pattern << "' and '" << entry.pattern
                 << "' conflict: module '" << m << "' gets two "
                 << (prepare ? styleName(entry.style) : "styles");
      }
      // transformers' Conv1D (GPT-2) is a Linear whose weight is stored
      // [in, out]: the same styles, the weight's dims swapped.
      bool conv1d = isA(cls, "Conv1D");
      bool linear = isA(cls, "Linear") || conv1d;
      bool embedding = isA(cls, "Embedding");
      int64_t packed = 1;
      auto unsupported = [&](StringRef supported) {
        return emitError(fn.getLoc(), "TP plan entry '")
               << entry.pattern << "': " << styleName(entry.style)
               << " applies to " << supported << "; module '" << m << "' is a "
               << kind;
      };
      auto paramsOf = [&](StringRef name) -> std::optional<std::string> {
        std::string fqn = m + "." + name.str();
        if (params.count(fqn))
          return fqn;
        return std::nullopt;
      };
      switch (entry.style) {
      case Style::Colwise:
      case Style::Rowwise: {
        if (!linear && !embedding)
          return unsupported("nn.Linear, Conv1D and nn.Embedding");
        bool col = entry.style == Style::Colwise;
        // Seed 002: colwise Linear S(0) weight and bias, Embedding S(1);
        // rowwise Linear S(1) weight and Replicate bias, Embedding S(0).
        // Conv1D: colwise S(1), rowwise S(0).
        int64_t weightDim = (linear && !conv1d) == col ? 0 : 1;
        std::optional<std::string> w = paramsOf("weight");
        // A packed colwise projection shards each of its pieces.
        if (col && linear && w)
          packed = packedPieces(fn, fn.getArgument(params[*w]));
        auto sharded = [&](int64_t dim) {
          return packed > 1 ? Placement::stridedShard(dim, packed)
                            : Placement::shard(dim);
        };
        if (w && failed(assign(*w, sharded(weightDim), entry)))
          return failure();
        if (auto b = paramsOf("bias"))
          if (failed(
                  assign(*b, col ? sharded(0) : Placement::replicate(), entry)))
            return failure();
        break;
      }
      case Style::SequenceParallel: {
        // Norms over the last dim by their class names: nn.LayerNorm and
        // the models' own (T5LayerNorm, LlamaRMSNorm, ...).
        if (!isA(cls, "Dropout") && !llvm::any_of(cls, [](StringRef c) {
              return c.ends_with("LayerNorm") || c.contains("RMSNorm");
            }))
          return unsupported("nn.LayerNorm, nn.Dropout and RMSNorm");
        for (auto &p : params)
          if (within(p.getKey(), m) && p.getKey() != m)
            if (failed(assign(p.getKey(), Placement::replicate(), entry)))
              return failure();
        break;
      }
      default:
        break;
      }
      out.styled.push_back({m, &entry, embedding, packed});
    }
  }

  // Head-parallel attention needs whole heads on each rank.
  for (auto &m : classes) {
    if (!isA(m.getValue(), "MultiheadAttention"))
      continue;
    auto info = modulesAttr.getAs<DictionaryAttr>(m.getKey());
    auto heads = info ? info.getAs<IntegerAttr>("num_heads") : IntegerAttr();
    for (StringRef name : {"in_proj_weight", "q_proj_weight", "in_proj_bias"}) {
      auto it = out.placements.find((m.getKey() + "." + name).str());
      if (it == out.placements.end() || !it->second.isShardLike() ||
          it->second.dim != 0 || !heads || heads.getInt() % tpSize == 0)
        continue;
      return emitError(fn.getLoc(), "TP plan entry '")
             << setBy[it->getKey()] << "': module '" << m.getKey() << "' has "
             << heads.getInt() << " heads, which do not divide over " << tpSize
             << " tp ranks: a head-parallel '" << name
             << "' needs num_heads % tp == 0";
    }
  }

  // Colwise projections of an attention module (transformers' q/k/v_proj,
  // query/key/value, GPT-2's c_attn) give each rank its heads: the tp
  // degree must divide the query heads and the key/value heads.
  for (const TPStyledModule &styled : out.styled) {
    if (styled.entry->style != Style::Colwise)
      continue;
    StringRef parent = StringRef(styled.fqn).rsplit('.').first;
    auto info = modulesAttr.getAs<DictionaryAttr>(parent);
    if (parent == styled.fqn || !info)
      continue;
    for (StringRef key : {"num_heads", "num_kv_heads"}) {
      auto heads = info.getAs<IntegerAttr>(key);
      if (!heads || heads.getInt() % tpSize == 0)
        continue;
      return emitError(fn.getLoc(), "TP plan entry '")
             << styled.entry->pattern << "': attention module '" << parent
             << "' has " << heads.getInt()
             << (key == "num_heads" ? " heads" : " key/value heads")
             << ", which do not divide over " << tpSize
             << " tp ranks: its colwise projections need whole heads on each "
                "rank";
    }
  }

  // Optimizer state of a parameter's shape (momentum, Adam's moments, not
  // its step count) and its carried gradient follow the parameter.
  SmallVector<std::pair<std::string, Placement>> states;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (getArgRole(fn, i) != "optim_state" && getArgRole(fn, i) != "grad")
      continue;
    // Its parameter's FQN is a proper prefix of its own at a '.' (one at
    // most: a parameter has no children).
    StringRef fqn = getArgFqn(fn, i);
    for (StringRef prefix = fqn; prefix.contains('.');) {
      prefix = prefix.rsplit('.').first;
      auto it = out.placements.find(prefix);
      if (it != out.placements.end() &&
          fn.getArgumentTypes()[i] == fn.getArgumentTypes()[params[prefix]]) {
        states.push_back({fqn.str(), it->getValue()});
        break;
      }
    }
  }
  for (auto &[fqn, p] : states)
    out.placements[fqn] = p;
  return out;
}

namespace {

/// The forward ops of each module FQN, kept current as constraints are
/// inserted: finding a module's ops then costs its own ops, not a walk of
/// the whole step per styled module (32 layers x 10 styles x 14k ops on
/// Llama-3-8B).
class ForwardOpIndex {
public:
  explicit ForwardOpIndex(func::FuncOp fn) : body(fn.getBody().front()) {
    fn.walk([&](Operation *op) {
      if (op != fn)
        add(op);
    });
  }
  void add(Operation *op) {
    if (getPhase(op) == "forward")
      byModule[getModuleFqn(op)].push_back(op);
  }
  /// The forward ops of module `m` and its submodules, in program order.
  SmallVector<Operation *> within(StringRef m) const {
    SmallVector<Operation *> ops;
    for (const auto &entry : byModule)
      if (::within(entry.getKey(), m))
        llvm::append_range(ops, entry.getValue());
    llvm::stable_sort(ops, [&](Operation *a, Operation *b) {
      Operation *x = body.findAncestorOpInBlock(*a),
                *y = body.findAncestorOpInBlock(*b);
      return x != y && x->isBeforeInBlock(y);
    });
    return ops;
  }

private:
  Block &body;
  llvm::StringMap<SmallVector<Operation *>> byModule;
};

/// The forward ops of module `m` (see constrainTPBoundaries), in program
/// order. `own`: the ops whose `spmd.module` lies in `m` (ForwardOpIndex's
/// `within`); `styled`: the modules the plan styles.
llvm::SetVector<Operation *> moduleOps(func::FuncOp fn,
                                       ArrayRef<Operation *> own, StringRef m,
                                       ArrayRef<StringRef> styled) {
  llvm::SetVector<Operation *> ops(own.begin(), own.end());
  if (!ops.empty())
    return ops;
  // A module run by its parent through its parameters (F.linear with
  // out_proj.weight): the views and dtype casts (mixed precision) of its
  // parameters and the op they feed. An op of another module that the plan
  // styles (a head tied to this embedding) is that module's.
  auto styledElsewhere = [&](Operation *op) {
    StringRef fqn = getModuleFqn(op);
    return llvm::any_of(styled, [&](StringRef s) {
      return s != m && within(fqn, s) && !within(m, s);
    });
  };
  DenseSet<Operation *> reached;
  for (BlockArgument arg : fn.getArguments()) {
    if (!within(getArgFqn(fn, arg.getArgNumber()), m))
      continue;
    SmallVector<Value> work = {arg};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (getPhase(user) != "forward" || styledElsewhere(user) ||
            !reached.insert(user).second)
          continue;
        if (aten::isRearrangement(user) || isa<aten::ToCopyOp>(user))
          work.append(user->result_begin(), user->result_end());
      }
    }
  }
  fn.walk([&](Operation *op) {
    if (reached.contains(op))
      ops.insert(op);
  });
  return ops;
}

/// Whether argument `i` of `fn` is state (parameters, buffers, optimizer
/// state), not data (inputs, targets: a micro-batch).
bool isStateArgument(func::FuncOp fn, unsigned i) {
  StringRef role = getArgRole(fn, i);
  return role != "input" && role != "target";
}

/// The calls of a module whose forward ops are `ops`: a module run more
/// than once (gradient accumulation's micro-steps, a layer applied twice)
/// has ops per call, connected through their own values, and each call has
/// its own boundary values. Ops computed from the state arguments alone
/// (views of a parameter) serve every call and belong to each; data
/// arguments (inputs, targets: a micro-batch) belong to their call. In
/// program order.
SmallVector<llvm::SetVector<Operation *>>
splitCalls(func::FuncOp fn, const llvm::SetVector<Operation *> &ops) {
  auto fromArguments = [&](Value v, const DenseSet<Operation *> &shared) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return isStateArgument(fn, arg.getArgNumber());
    Operation *def = v.getDefiningOp();
    return shared.contains(def) || def->hasTrait<OpTrait::ConstantLike>();
  };
  DenseSet<Operation *> shared;
  for (Operation *op : ops)
    if (llvm::all_of(op->getOperands(),
                     [&](Value v) { return fromArguments(v, shared); }))
      shared.insert(op);
  // One call: ops joined by a value one defines and the other reads, or by
  // an outside value both read.
  llvm::EquivalenceClasses<Operation *> calls;
  DenseMap<Value, Operation *> firstReader;
  for (Operation *op : ops) {
    if (shared.contains(op))
      continue;
    calls.insert(op);
    for (Value v : op->getOperands()) {
      if (fromArguments(v, shared))
        continue;
      Operation *def = v.getDefiningOp();
      Operation *reader = firstReader.try_emplace(v, op).first->second;
      calls.unionSets(op, def && ops.contains(def) ? def : reader);
    }
  }
  DenseMap<Operation *, size_t> index;
  for (Operation *op : ops)
    if (!shared.contains(op))
      index.try_emplace(calls.getLeaderValue(op), index.size());
  SmallVector<llvm::SetVector<Operation *>> out(
      std::max<size_t>(index.size(), 1));
  for (Operation *op : ops) {
    if (!shared.contains(op))
      out[index.lookup(calls.getLeaderValue(op))].insert(op);
    else
      for (llvm::SetVector<Operation *> &call : out)
        call.insert(op);
  }
  return out;
}

} // namespace

LogicalResult spmd::constrainTPBoundaries(func::FuncOp fn,
                                          const TPResolution &resolution) {
  MLIRContext *ctx = fn.getContext();
  MeshOp meshOp = getOnlyMesh(fn->getParentOfType<ModuleOp>(), "tp");
  if (!meshOp)
    return failure();
  auto mesh = FlatSymbolRefAttr::get(meshOp.getSymNameAttr());
  int64_t meshRank = meshOp.getRank(), tpDim = meshRank - 1;
  SmallVector<int64_t> free;
  for (int64_t m = 0; m < meshRank; ++m)
    if (m != tpDim)
      free.push_back(m);

  // Outer modules first: a module's input constraints then feed its
  // submodules, whose own constraints on the same input (a colwise
  // projection's replicate inside prepare_module_input's) find it already
  // in place instead of redistributing it again.
  ForwardOpIndex index(fn);
  SmallVector<const TPStyledModule *> order;
  SmallVector<StringRef> styledFqns;
  for (const TPStyledModule &styled : resolution.styled) {
    order.push_back(&styled);
    styledFqns.push_back(styled.fqn);
  }
  llvm::stable_sort(
      order, [](const TPStyledModule *a, const TPStyledModule *b) {
        return llvm::count(a->fqn, '.') < llvm::count(b->fqn, '.');
      });
  for (const TPStyledModule *styledPtr : order) {
    const TPStyledModule &styled = *styledPtr;
    const std::string &m = styled.fqn;
    const TPPlanEntry *entry = styled.entry;
    SmallVector<Operation *> own = index.within(m);
    bool runsItself = !own.empty();
    llvm::SetVector<Operation *> all = moduleOps(fn, own, m, styledFqns);
    if (all.empty())
      return emitError(fn.getLoc(), "TP plan entry '")
             << entry->pattern << "': module '" << m
             << "' runs no op in the captured forward";
    for (const llvm::SetVector<Operation *> &ops : splitCalls(fn, all)) {
      // Boundary values, of the module's own ops (not the constraints an
      // enclosing module's style put at its boundary).
      llvm::SetVector<Value> inputs, outputs;
      for (Operation *op : ops) {
        if (isa<ShardingConstraintOp>(op))
          continue;
        for (Value v : op->getOperands()) {
          if (!isa<RankedTensorType>(v.getType()))
            continue;
          // State is never a forward argument, the module's own or
          // another's (a head tied to the embedding), even read in another
          // dtype (mixed precision casts every parameter first).
          if (BlockArgument arg = getCastArgument(v);
              arg && isStateArgument(fn, arg.getArgNumber()))
            continue;
          if (Operation *def = v.getDefiningOp()) {
            if ((ops.contains(def) && !isa<ShardingConstraintOp>(def)) ||
                def->hasTrait<OpTrait::ConstantLike>())
              continue;
          } else if (within(
                         getArgFqn(fn, cast<BlockArgument>(v).getArgNumber()),
                         m)) {
            continue;
          }
          inputs.insert(v);
        }
      }
      // Values the module's own ops read (a parameter view every call
      // uses) are not outputs.
      for (Operation *op : ops)
        for (Value v : op->getResults())
          if (!isa<ShardingConstraintOp>(op) &&
              llvm::any_of(v.getUsers(), [&](Operation *user) {
                StringRef phase = getPhase(user);
                return !all.contains(user) &&
                       (phase == "forward" || phase == "loss" ||
                        isa<func::ReturnOp>(user));
              }))
            outputs.insert(v);

      // Seed 002's layouts for this style; empty: nothing to constrain.
      std::vector<std::optional<Placement>> in, desiredIn, out, desiredOut;
      auto orDefault = [](const std::vector<std::optional<Placement>> &given,
                          Placement fallback) {
        return given.empty() || !given.front() ? fallback : *given.front();
      };
      switch (entry->style) {
      case Style::Colwise:
        // A projection its parent computes from its parameters
        // (`dt_proj.weight @ x.transpose(1, 2)` then `+ dt_proj.bias[:,
        // None]`: Mamba's, Jamba's) has no Linear-shaped boundary to hold
        // Shard(-1): the weight's and bias's Shard(0) place its features.
        if (!runsItself && entry->inputLayouts.empty() &&
            entry->outputLayouts.empty())
          break;
        in = {orDefault(entry->inputLayouts, Placement::replicate())};
        desiredIn = {Placement::replicate()};
        out = {orDefault(entry->outputLayouts,
                         styled.packed > 1
                             ? Placement::stridedShard(-1, styled.packed)
                             : Placement::shard(-1))};
        break;
      case Style::Rowwise: {
        Placement desired =
            styled.embedding ? Placement::replicate() : Placement::shard(-1);
        in = {orDefault(entry->inputLayouts, Placement::shard(-1))};
        desiredIn = {desired};
        out = {orDefault(entry->outputLayouts, Placement::replicate())};
        break;
      }
      case Style::SequenceParallel:
        in = desiredIn = out = {Placement::shard(entry->sequenceDim)};
        break;
      case Style::PrepareModuleInput:
        in = entry->inputLayouts;
        desiredIn = entry->desiredInputLayouts;
        break;
      case Style::PrepareModuleOutput:
        out = entry->outputLayouts;
        desiredOut = entry->desiredOutputLayouts;
        break;
      case Style::Placements:
        break;
      }
      auto countError = [&](StringRef what, size_t want, size_t have) {
        return emitError(fn.getLoc(), "TP plan entry '")
               << entry->pattern << "': " << styleName(entry->style)
               << " gives layouts for " << want << " " << what
               << (want == 1 ? "" : "s") << ", but module '" << m << "' has "
               << have;
      };
      // prepare_* list every input/output; the other styles name the first.
      bool listed = entry->style == Style::PrepareModuleInput ||
                    entry->style == Style::PrepareModuleOutput;
      if (!in.empty() && (listed ? in.size() != inputs.size() : inputs.empty()))
        return countError("input", in.size(), inputs.size());
      if (!out.empty() &&
          (listed ? out.size() != outputs.size() : outputs.empty()))
        return countError("output", out.size(), outputs.size());

      // Constrains input or output `i`, `v`, to each layout of its chain in
      // turn: what the value is (input_layouts / output_layouts), then what
      // is wanted of it (the desired layout, where given and different). An
      // input is constrained before its first use in the module, for the
      // module's uses; an output after its definition, for the forward's
      // other uses.
      auto constrain = [&](Value v, size_t i, bool output) -> LogicalResult {
        const auto &given = output ? out : in;
        const auto &desired = output ? desiredOut : desiredIn;
        SmallVector<Placement> chain;
        if (given[i])
          chain.push_back(*given[i]);
        if (i < desired.size() && desired[i] &&
            (chain.empty() || *desired[i] != chain.back()))
          chain.push_back(*desired[i]);
        if (chain.empty())
          return success();
        std::string what = (output ? "output " : "input ") + std::to_string(i);
        auto type = cast<RankedTensorType>(v.getType());
        OpBuilder b(ctx);
        Operation *at = v.getDefiningOp();
        if (output) {
          b.setInsertionPointAfter(at);
        } else {
          at = nullptr;
          for (Operation *user : v.getUsers())
            if (ops.contains(user) && (!at || user->isBeforeInBlock(at)))
              at = user;
          b.setInsertionPoint(at);
        }
        Value current = v;
        SmallVector<Operation *> created;
        for (Placement p : chain) {
          p = normalized(unflattened(v, p), type.getRank());
          if (p.isShardLike() && (p.dim < 0 || p.dim >= type.getRank()))
            return emitError(fn.getLoc(), "TP plan entry '")
                   << entry->pattern << "': the " << what << " of module '" << m
                   << "' has rank " << type.getRank() << " and cannot take "
                   << p.str();
          std::vector<Placement> placements(meshRank, Placement::replicate());
          placements[tpDim] = p;
          auto c = ShardingConstraintOp::create(
              b, at->getLoc(), type, current, getLayoutAttr(mesh, placements),
              free.empty() ? DenseI64ArrayAttr()
                           : b.getDenseI64ArrayAttr(free));
          copyProvenance(at, c);
          index.add(c);
          c->setAttr("spmd.reason",
                     b.getStringAttr("tp: " + styleName(entry->style) + " '" +
                                     m + "' " + what + " -> " + p.str()));
          created.push_back(c);
          current = c.getResult();
        }
        v.replaceUsesWithIf(current, [&](OpOperand &use) {
          Operation *user = use.getOwner();
          if (llvm::is_contained(created, user))
            return false;
          if (!output)
            return ops.contains(user);
          StringRef phase = getPhase(user);
          return !ops.contains(user) && (phase == "forward" || phase == "loss");
        });
        return success();
      };
      for (auto [i, v] : llvm::enumerate(inputs))
        if (i < in.size() && failed(constrain(v, i, /*output=*/false)))
          return failure();
      for (auto [i, v] : llvm::enumerate(outputs))
        if (i < out.size() && failed(constrain(v, i, /*output=*/true)))
          return failure();
    }
  }
  return success();
}

FailureOr<std::unique_ptr<TPConfig>>
spmd::parseTPConfig(ModuleOp module, const ParallelOptions &options,
                    StringRef mode, ArrayRef<std::string> names,
                    ArrayRef<StringRef> known) {
  SmallVector<StringRef> keys = {"plan", "bucket-cap-mb", "search"};
  keys.append(known.begin(), known.end());
  FailureOr<ParallelOptions> checked =
      checkModeOptions(module, options, mode, names, keys);
  if (failed(checked))
    return failure();
  auto config = std::make_unique<TPConfig>();
  config->options = std::move(*checked);
  // DTensor's eager semantics for the forward, the search for the rest:
  // the styles fix the forward's layouts as parallelize_module does.
  config->options.options.try_emplace("search", "greedy-forward");
  auto it = options.options.find("plan");
  if (it == options.options.end() || it->second.empty())
    return emitError(module.getLoc())
           << mode << " needs a TP plan: plan=FILE.json (DESIGN.md 4)";
  FailureOr<TPPlan> plan = parseTPPlan(module, it->second);
  if (failed(plan))
    return failure();
  config->plan = std::move(*plan);
  FailureOr<func::FuncOp> fn = getTrainStep(module);
  if (failed(fn))
    return failure();
  FailureOr<TPResolution> resolution =
      resolveTPPlan(*fn, config->plan, options.meshShape.back());
  if (failed(resolution))
    return failure();
  config->resolution = std::move(*resolution);
  return config;
}
