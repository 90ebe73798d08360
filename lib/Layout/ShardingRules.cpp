//===- ShardingRules.cpp - op sharding strategies by einsum rule ----------===//

#include "spmd/Layout/ShardingRules.h"

using namespace spmd::layout;

std::string OpStrategy::str() const {
  std::string s;
  for (size_t i = 0; i < operands.size(); ++i)
    s += (i ? ", " : "") + operands[i].str();
  return s + " -> " + result.str();
}

std::vector<OpStrategy> EinsumRule::strategies() const {
  std::vector<OpStrategy> out;
  OpStrategy replicated{
      std::vector<Placement>(operands.size(), Placement::replicate()),
      Placement::replicate()};
  out.push_back(replicated);

  // Labels in order of first appearance: the result's, then contracted.
  std::string labels;
  auto add = [&](char c) {
    if (c != '1' && labels.find(c) == std::string::npos)
      labels += c;
  };
  for (char c : result)
    add(c);
  for (const std::string &operand : operands)
    for (char c : operand)
      add(c);

  for (char label : labels) {
    if (unshardable.find(label) != std::string::npos)
      continue;
    OpStrategy s = replicated;
    for (size_t i = 0; i < operands.size(); ++i) {
      size_t pos = operands[i].find(label);
      if (pos != std::string::npos)
        s.operands[i] = Placement::shard(static_cast<int64_t>(pos));
    }
    size_t pos = result.find(label);
    s.result = pos == std::string::npos
                   ? Placement::partial(ReduceKind::Sum)
                   : Placement::shard(static_cast<int64_t>(pos));
    if (s.result.kind == Placement::Kind::Partial)
      for (int i : additive)
        s.operands[i] = Placement::partial(ReduceKind::Sum);
    out.push_back(s);
  }

  for (const std::vector<int> &group : linearGroups) {
    OpStrategy s = replicated;
    for (int i : group)
      s.operands[i] = Placement::partial(ReduceKind::Sum);
    s.result = Placement::partial(ReduceKind::Sum);
    out.push_back(s);
  }
  return out;
}
