#pragma once
// A graph scope's values by name: what the reader resolves every argument
// through, and what passes ask when they look a value up by name.
//
// Open addressing with linear probing over one array of (hash, Value*)
// slots. A lookup reads one slot and the Value it finds; std::unordered_map
// read a bucket, then a heap node, then the Value, and at 10^5 values each of
// those was a cache miss (the reader's lookups cost 7-9% of a 100k-node
// preview, bench/scale.py).
//
// Invariants: slots_ is empty or a power of two long and at most half full;
// a slot is empty (value == nullptr) or holds a Value whose name hashes to
// `hash` and is unique in the index. Values are keyed by their own name,
// which must not change while they are indexed. There is no erase: a graph
// that drops values rebuilds its index (Graph::pruneValues), which costs what
// dropping them costs already.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace pipecut::ir {

struct Value;

class ValueIndex {
 public:
  Value* find(std::string_view name) const;
  // False, and nothing changes, when a value of that name is indexed already.
  bool insert(Value* v);
  // Room for n values without growing.
  void reserve(size_t n);
  void clear();
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    Value* value = nullptr;
  };
  static uint64_t hashOf(std::string_view name);
  void rehash(size_t slots);

  std::vector<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace pipecut::ir
