#include "ir/value_index.h"

#include <functional>

#include "ir/ir.h"

namespace pipecut::ir {

uint64_t ValueIndex::hashOf(std::string_view name) { return std::hash<std::string_view>{}(name); }

Value* ValueIndex::find(std::string_view name) const {
  if (slots_.empty()) return nullptr;
  const uint64_t h = hashOf(name);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.value) return nullptr;  // half used at most: an empty slot always ends the probe
    if (s.hash == h && live(s) && s.value->name == name) return s.value;
  }
}

bool ValueIndex::insert(Value* v) { return insertHashed(hashOf(v->name), v); }

const Value* ValueIndex::insertAll(const std::unique_ptr<Value>* first, const std::unique_ptr<Value>* last) {
  const size_t n = static_cast<size_t>(last - first);
  reserve(count_ + n);  // no growth below: the slot fetched ahead stays the slot probed
  std::vector<uint64_t> hashes(n);
  for (size_t i = 0; i < n; ++i) hashes[i] = hashOf(first[i]->name);
  constexpr size_t kAhead = 8;
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(&slots_[hashes[i + kAhead] & mask], 1);
    if (!insertHashed(hashes[i], first[i].get())) return first[i].get();
  }
  return nullptr;
}

bool ValueIndex::insertHashed(uint64_t h, Value* v) {
  if (2 * (used_ + 1) > slots_.size()) {
    // Room for the live values twice over: doubles a full table, and only
    // clears a table that is mostly erased slots.
    size_t slots = 16;
    while (slots < 2 * (count_ + 1) + 1) slots *= 2;
    rehash(slots);
  }
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.value) {
      s = {h, v};
      ++count_;
      ++used_;
      return true;
    }
    if (s.hash == h && live(s) && s.value->name == v->name) return false;
  }
}

void ValueIndex::erase(const Value* v) {
  if (slots_.empty()) return;
  const uint64_t h = hashOf(v->name);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.value) return;
    if (s.value == v) {
      s.value = erasedMark();  // stays used: probes that passed it must still pass it
      --count_;
      return;
    }
  }
}

void ValueIndex::reserve(size_t n) {
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  if (slots > slots_.size()) rehash(slots);
}

void ValueIndex::clear() {
  slots_.clear();
  count_ = 0;
  used_ = 0;
}

void ValueIndex::rehash(size_t slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(slots, Slot{});
  const size_t mask = slots - 1;
  used_ = count_;
  for (const Slot& s : old) {
    if (!live(s)) continue;
    size_t i = s.hash & mask;
    while (slots_[i].value) i = (i + 1) & mask;
    slots_[i] = s;  // names were unique already: no comparison needed
  }
}

}  // namespace pipecut::ir
