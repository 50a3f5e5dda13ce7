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
// Invariants: slots_ is empty or a power of two long, and at most half of
// it is used (live or erased); a slot is empty (value == nullptr), erased
// (value == erasedMark(): a probe goes on past it), or holds a Value whose name
// hashes to `hash` and is unique in the index. Values are keyed by their own
// name, which must not change while they are indexed. Erasing marks the slot
// rather than rebuilding: dead code drops a handful of a graph's 10^5
// values, and re-inserting the rest cost a cache miss each.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace pipecut::ir {

struct Value;

class ValueIndex {
 public:
  Value* find(std::string_view name) const;
  // False, and nothing changes, when a value of that name is indexed already.
  bool insert(Value* v);
  // Indexes values [first, last) as insert() would, one after another, and
  // returns the first whose name is taken (nothing after it is indexed), or
  // nullptr. Faster than insert() one by one at 10^5 values: the slots are
  // found ahead and fetched while earlier values go in, where each insert
  // alone waits for its slot's cache miss.
  const Value* insertAll(const std::unique_ptr<Value>* first, const std::unique_ptr<Value>* last);
  // Drops `v` (indexed under its name); nothing when it is not indexed.
  void erase(const Value* v);
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
  static Value* erasedMark() { return reinterpret_cast<Value*>(alignof(std::max_align_t)); }
  static bool live(const Slot& s) { return s.value && s.value != erasedMark(); }
  void rehash(size_t slots);
  bool insertHashed(uint64_t h, Value* v);

  std::vector<Slot> slots_;
  size_t count_ = 0;  // live values
  size_t used_ = 0;   // live and erased slots
};

}  // namespace pipecut::ir
