// Stage summaries for the manifest (partition/stage_summary.h).
#include "partition/stage_summary.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <utility>

#include <absl/container/flat_hash_map.h>


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
  const pt2::TensorIndex index(whole);
  std::vector<std::vector<const pt2::StoredTensor*>> tensors(liftedTargets.size());
  for (size_t s = 0; s < liftedTargets.size(); ++s)
    for (std::string_view target : liftedTargets[s]) tensors[s].push_back(index.find(target));
  return tiedGroups(whole, tensors);
}

// Storage identity: pt2::Blob::storageKey. A deep model has
// 10^4 tensors, nearly all alone in their storage and lifted by one stage:
// only storages that a second stage holds matter, and they are found from
// the lifted tensors alone (one hash each). The package's tables, for the
// other names of such a storage, are walked only when there is one.
// (Sorting every stored tensor by record, and hashing every FQN, cost
// 7 ms at 10^5 nodes, a cache miss per map node and string.)
std::vector<TiedGroup> tiedGroups(const pt2::Package& whole,
                                  const std::vector<std::vector<const pt2::StoredTensor*>>& liftedTensors) {
  using Storage = std::pair<const void*, std::string_view>;
  auto storageOf = [](const pt2::StoredTensor& t) { return t.data.storageKey(t.fqn); };
  struct Held {
    uint32_t lastStage;
    int32_t group = -1;  // index in `groups` once a second stage holds the storage
  };
  struct Group {
    Storage storage;
    TiedGroup tied;
  };
  size_t lifted = 0;
  for (const auto& tensors : liftedTensors) lifted += tensors.size();
  absl::flat_hash_map<Storage, Held> held;
  held.reserve(lifted);
  std::vector<Group> groups;
  // Stages in increasing order: each stage list comes out sorted, and a
  // repeat is the last entry.
  for (size_t s = 0; s < liftedTensors.size(); ++s) {
    const auto stage = static_cast<uint32_t>(s);
    for (const pt2::StoredTensor* t : liftedTensors[s]) {
      if (!t) continue;
      auto [it, fresh] = held.try_emplace(storageOf(*t), Held{stage});
      Held& h = it->second;
      if (fresh || h.lastStage == stage) continue;
      if (h.group < 0) {
        h.group = static_cast<int32_t>(groups.size());
        groups.push_back({it->first, TiedGroup{{}, {h.lastStage}}});
      }
      groups[static_cast<size_t>(h.group)].tied.stages.push_back(stage);
      h.lastStage = stage;
    }
  }
  if (groups.empty()) return {};
  for (const auto* table : {&whole.weights, &whole.constants})
    for (const auto& [fqn, t] : *table)
      if (auto it = held.find(storageOf(t)); it != held.end() && it->second.group >= 0)
        groups[static_cast<size_t>(it->second.group)].tied.names.push_back(fqn);
  // Names sorted, each once (a name in both tables); groups ordered by
  // their first name: storages' addresses (a checkpoint's mapping) differ
  // from run to run, and the manifest must not.
  for (Group& g : groups) {
    auto& names = g.tied.names;
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.tied.names < b.tied.names; });
  std::vector<TiedGroup> out;
  for (Group& g : groups) out.push_back(std::move(g.tied));
  return out;
}

}  // namespace pipecut::partition
