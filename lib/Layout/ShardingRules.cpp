//===- ShardingRules.cpp - op sharding strategies by einsum rule ----------===//

#include "spmd/Layout/ShardingRules.h"

using namespace spmd::layout;

std::string OpStrategy::str() const {
  return joinPlacements(operands) + " -> " + joinPlacements(results);
}

EinsumRule EinsumRule::identity(int64_t rank) {
  std::string labels;
  for (int64_t d = 0; d < rank; ++d)
    labels.push_back(static_cast<char>('a' + d));
  EinsumRule rule{{labels}, {labels}};
  rule.linearGroups = {{0}};
  rule.movesElements = true;
  return rule;
}

std::vector<OpStrategy> EinsumRule::strategies() const {
  std::vector<OpStrategy> out;
  OpStrategy replicated{
      std::vector<Placement>(operands.size(), Placement::replicate()),
      std::vector<Placement>(results.size(), Placement::replicate())};
  out.push_back(replicated);

  // Labels in order of first appearance: the results', then contracted.
  std::string labels;
  auto add = [&](char c) {
    if (c != '1' && labels.find(c) == std::string::npos)
      labels += c;
  };
  for (const std::string &result : results)
    for (char c : result)
      add(c);
  for (const std::string &operand : operands)
    for (char c : operand)
      add(c);

  for (char label : labels) {
    if (unshardable.find(label) != std::string::npos)
      continue;
    OpStrategy s = replicated;
    s.evenShards = evenOnly.find(label) != std::string::npos;
    for (auto [grouped, count] : groupedLabels)
      if (grouped == label)
        s.divides = count;
    for (size_t i = 0; i < operands.size(); ++i) {
      size_t pos = operands[i].find(label);
      if (pos != std::string::npos)
        s.operands[i] = Placement::shard(static_cast<int64_t>(pos));
    }
    bool contracted = false;
    for (size_t i = 0; i < results.size(); ++i) {
      size_t pos = results[i].find(label);
      if (pos != std::string::npos) {
        s.results[i] = Placement::shard(static_cast<int64_t>(pos));
        continue;
      }
      contracted = true;
      bool reducedByOp = std::find(selfReduced.begin(), selfReduced.end(),
                                   static_cast<int>(i)) != selfReduced.end();
      s.results[i] =
          reducedByOp ? Placement::replicate() : Placement::partial(reduce);
    }
    if (contracted)
      for (int i : additive)
        s.operands[i] = Placement::partial(reduce);
    out.push_back(s);
  }

  std::vector<ReduceKind> kinds = {reduce};
  if (movesElements)
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Avg, ReduceKind::Max,
                            ReduceKind::Min})
      if (kind != reduce)
        kinds.push_back(kind);
  for (ReduceKind kind : kinds)
    for (const std::vector<int> &group : linearGroups) {
      OpStrategy s = replicated;
      for (int i : group)
        s.operands[i] = Placement::partial(kind);
      s.results.assign(results.size(), Placement::partial(kind));
      out.push_back(s);
    }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}
