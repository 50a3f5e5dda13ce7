// Stage summaries for the manifest (partition/stage_summary.h).
#include "partition/stage_summary.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <unordered_map>
#include <utility>


namespace pipecut::partition {

// One pass over the nodes, counting per module the stage its nodes run in
// (or that they are mixed); then a module is reported unless an enclosing
// path is whole in the same stage. Modules are counted by their frames' ids
// (ir/module_paths.h), in an array: hashing each frame's path cost a cache
// miss per frame at 10^5 nodes.
std::vector<std::vector<std::string>> containedModules(const ir::Graph& g, const Assignment& a) {
  struct Count {
    int stage = -1;      // the one stage holding all of its nodes so far, or kMixed
    size_t nodes = 0;    // node runs counted (0: not seen yet)
  };
  constexpr int kMixed = -2;
  ir::FrameTable table;
  std::vector<Count> count;         // by module id in `table`
  std::vector<uint32_t> seen;       // ids counted, in first-seen order
  // A node with the stack (shared per module call) and the stage of the
  // node before it changes no count's stage: skipped, not counted again.
  const std::vector<ir::ModuleFrame>* lastStack = nullptr;
  int lastStage = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int st = a.stageOf[i];
    const std::vector<ir::ModuleFrame>* stack = g.nodes[i]->moduleStack.get();
    if (stack && stack == lastStack && st == lastStage) continue;
    lastStack = stack;
    lastStage = st;
    for (const auto& f : g.nodes[i]->frames()) {
      if (f.module == ir::ModulePaths::kRoot) continue;
      const ir::ModulePaths& paths = table.of(f);
      if (count.empty()) count.resize(paths.size());
      Count& c = count[f.module];
      if (c.nodes == 0) seen.push_back(f.module);
      c.stage = c.nodes == 0 ? st : (c.stage == st ? st : kMixed);
      c.nodes++;
    }
  }
  std::vector<std::vector<std::string>> out(static_cast<size_t>(a.numStages));
  for (uint32_t m : seen) {
    const Count& c = count[m];
    if (c.stage < 0) continue;
    bool covered = false;
    const ir::ModulePaths& paths = *table.get();  // set: `seen` is not empty
    for (uint32_t up = paths.parent(m); up != ir::ModulePaths::kRoot && !covered; up = paths.parent(up))
      covered = count[up].nodes > 0 && count[up].stage == c.stage;
    if (!covered) out[static_cast<size_t>(c.stage)].push_back(paths.path(m));
  }
  for (auto& mods : out) std::sort(mods.begin(), mods.end());
  return out;
}

std::vector<TiedGroup> tiedGroups(const pt2::Package& whole,
                                  const std::vector<std::vector<std::string_view>>& liftedTargets) {
  // Storage identity: the same record of the same archive. Sorted runs of
  // one flat array, not a map of sets: a deep model has 10^4 tensors,
  // nearly all alone in their storage.
  struct Stored {
    const void* source;
    std::string_view record, fqn;
    bool operator<(const Stored& o) const {
      if (source != o.source) return std::less<const void*>{}(source, o.source);
      return std::tie(record, fqn) < std::tie(o.record, o.fqn);
    }
  };
  std::vector<Stored> stored;
  stored.reserve(whole.weights.size() + whole.constants.size());
  for (const auto* table : {&whole.weights, &whole.constants})
    for (const auto& [fqn, t] : *table) stored.push_back({t.data.source.get(), t.data.record, fqn});
  std::sort(stored.begin(), stored.end());
  // Groups: [begin, end) ranges of `stored`, one per storage; a name in
  // both tables counts once.
  std::vector<std::pair<size_t, size_t>> groups;
  // Each lifted value finds its group through the FQN: asking every group
  // about every lifted value cost weights x weights lookups (seconds for a
  // model with 10^4 weights).
  std::unordered_map<std::string_view, size_t> groupOf;
  groupOf.reserve(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    if (i == 0 || stored[i].source != stored[i - 1].source || stored[i].record != stored[i - 1].record)
      groups.emplace_back(i, i);
    groups.back().second = i + 1;
    groupOf.emplace(stored[i].fqn, groups.size() - 1);
  }
  // Stages in increasing order: each holder list comes out sorted, and a
  // repeat is the last entry.
  std::vector<std::vector<uint32_t>> holders(groups.size());
  for (size_t s = 0; s < liftedTargets.size(); ++s)
    for (std::string_view target : liftedTargets[s])
      if (auto it = groupOf.find(target); it != groupOf.end()) {
        auto& h = holders[it->second];
        if (h.empty() || h.back() != s) h.push_back(static_cast<uint32_t>(s));
      }
  std::vector<TiedGroup> out;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (holders[k].size() < 2) continue;
    TiedGroup g;
    for (size_t i = groups[k].first; i < groups[k].second; ++i)
      if (g.names.empty() || g.names.back() != stored[i].fqn) g.names.emplace_back(stored[i].fqn);
    g.stages = holders[k];
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace pipecut::partition
