#pragma once
// The module paths and module calls of one program's nn_module_stacks, each
// distinct one once, numbered densely. The reader interns every frame it
// parses here, so a frame carries its path's id and its call's id: walks
// that count, compare or look up modules per frame (the module tree, module
// contiguity, the stage summaries, split points) index arrays by id and
// compare integers, where they hashed and compared path strings. At 10^5
// nodes (~2*10^4 module calls, ~4 frames each) each of those string hashes
// was a cache miss, and together they made those phases grow faster than
// the node count (bench/scale.py).
//
// Invariants: path id 0 is the root "" (kRoot); every interned path's dotted
// ancestors are interned too, before it ("a.b" before "a.b.c"), so
// parent(id) < id for every id but the root's; ids never change once given,
// and strings live at stable addresses for the table's lifetime. A call
// (the frame's (key, path) pair: one module called at one call site) is
// interned with its path.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace pipecut::ir {

class ModulePaths {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;
  // Real models nest a few dozen modules deep. A path's every prefix is kept,
  // so a (malformed) path of thousands of segments would cost quadratic
  // memory: refused (intern gives kNone) from this many dots on.
  static constexpr size_t kMaxDepth = 256;

  ModulePaths();
  // The id of `path`, interned with its dotted ancestors if new; kNone for
  // a path of kMaxDepth or more dots.
  uint32_t intern(std::string_view path);
  // The id of the call (key, path id), interned if new.
  uint32_t internCall(std::string_view key, uint32_t path);
  std::optional<uint32_t> find(std::string_view path) const;
  void reserve(size_t paths);  // room for this many paths and calls without rehashing

  const std::string& path(uint32_t id) const { return paths_[id]; }
  // "a.b" for "a.b.c" (up to the last '.'), the root for "a"; kNone for the root.
  uint32_t parent(uint32_t id) const { return parents_[id]; }
  size_t size() const { return paths_.size(); }
  size_t calls() const { return calls_.size(); }

 private:
  std::deque<std::string> paths_;  // a deque: the index's keys view these strings
  std::vector<uint32_t> parents_;
  absl::flat_hash_map<std::string_view, uint32_t> ids_;
  struct Call {
    uint32_t path;
    std::string_view key;  // a view of callKeys_
    bool operator==(const Call& o) const { return path == o.path && key == o.key; }
    template <class H>
    friend H AbslHashValue(H h, const Call& c) {
      return H::combine(std::move(h), c.path, c.key);
    }
  };
  std::deque<std::string> callKeys_;
  absl::flat_hash_map<Call, uint32_t> calls_;
};

}  // namespace pipecut::ir
