#include "runtime/generate/plan.h"

#include <algorithm>

#include "support/error.h"

namespace pipecut::runtime {

GenerationPlan::GenerationPlan(GenerationConfig config, std::vector<PromptRequest> prompts)
    : c_(config), prompts_(std::move(prompts)) {
  if (c_.rows < 1 || c_.slots < 1 || c_.chunk < 1 || c_.maxNewTokens < 1)
    internalError("generation plan", "rows, slots, chunk and max new tokens must be positive");
  for (size_t i = 0; i < prompts_.size(); ++i) {
    // The last decode step feeds token max-1 at position length + max - 2.
    const int64_t need = static_cast<int64_t>(prompts_[i].tokens.size()) + c_.maxNewTokens - 1;
    if (c_.cacheLength > 0 && need > c_.cacheLength)
      throw Error(ErrorKind::InvalidInput, "", "prompt " + prompts_[i].id,
                  std::to_string(prompts_[i].tokens.size()) + " tokens and --max-new-tokens " +
                      std::to_string(c_.maxNewTokens) + " need " + std::to_string(need) + " cache positions; the cache holds " +
                      std::to_string(c_.cacheLength));
    queue_.push_back(static_cast<int64_t>(i));
  }
  slots_.resize(static_cast<size_t>(c_.slots));
  tokens_.resize(prompts_.size());
  finish_.resize(prompts_.size());
  timings_.resize(prompts_.size());
}

std::vector<GenerationStep> GenerationPlan::start(double nowMs) {
  std::vector<GenerationStep> out;
  for (uint32_t s = 0; s < slots_.size(); ++s)
    if (auto step = fill(s, nowMs)) out.push_back(std::move(*step));
  return out;
}

bool GenerationPlan::rowEnded(int64_t sequence) const {
  return sequence < 0 || !finish_[static_cast<size_t>(sequence)].empty();
}

std::optional<GenerationStep> GenerationPlan::fill(uint32_t s, double nowMs) {
  Slot& slot = slots_[s];
  slot.active = false;
  if (queue_.empty()) return std::nullopt;
  // The first waiting prompt, and the next ones of its length.
  const int64_t first = queue_.front();
  queue_.pop_front();
  const size_t length = prompts_[static_cast<size_t>(first)].tokens.size();
  slot.sequence = {first};
  for (auto it = queue_.begin(); it != queue_.end() && static_cast<int64_t>(slot.sequence.size()) < c_.rows;) {
    if (prompts_[static_cast<size_t>(*it)].tokens.size() == length) {
      slot.sequence.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  while (static_cast<int64_t>(slot.sequence.size()) < c_.rows) slot.sequence.push_back(-1);
  for (int64_t q : slot.sequence)
    if (q >= 0) {
      timings_[static_cast<size_t>(q)].admittedMs = nowMs;
      promptTokens_ += length;
    }
  slot.active = true;
  slot.promptLength = static_cast<int64_t>(length);
  slot.consumed = 0;
  slot.position = 0;
  return prefillStep(s, true);
}

GenerationStep GenerationPlan::issue(GenerationStep step) {
  step.index = next_++;
  const Slot& slot = slots_[step.slot];
  step.sequence = slot.sequence;
  for (int64_t q : slot.sequence) step.generated.push_back(q < 0 ? 0 : static_cast<int64_t>(tokens_[static_cast<size_t>(q)].size()));
  return step;
}

GenerationStep GenerationPlan::prefillStep(uint32_t s, bool reset) {
  Slot& slot = slots_[s];
  GenerationStep step;
  step.slot = s;
  step.position = slot.position;
  step.length = std::min(c_.chunk, slot.promptLength - slot.consumed);
  step.reset = reset;
  step.prefill = true;
  step.samples = slot.consumed + step.length == slot.promptLength;
  for (int64_t q : slot.sequence) {
    const auto& prompt = prompts_[static_cast<size_t>(q < 0 ? slot.sequence[0] : q)].tokens;
    step.tokens.insert(step.tokens.end(), prompt.begin() + slot.consumed, prompt.begin() + slot.consumed + step.length);
  }
  slot.consumed += step.length;
  return issue(std::move(step));
}

GenerationStep GenerationPlan::decodeStep(uint32_t s) {
  const Slot& slot = slots_[s];
  GenerationStep step;
  step.slot = s;
  step.position = slot.position;
  step.length = 1;
  step.samples = true;
  for (int64_t q : slot.sequence) {
    // An ended row (or padding) feeds its last token again; its output is dropped.
    const int64_t real = q < 0 ? slot.sequence[0] : q;
    const auto& t = tokens_[static_cast<size_t>(real)];
    step.tokens.push_back(t.empty() ? prompts_[static_cast<size_t>(real)].tokens.back() : t.back());
  }
  return issue(std::move(step));
}

std::optional<GenerationStep> GenerationPlan::advance(const GenerationStep& step, const std::vector<int64_t>& sampled,
                                                      double nowMs) {
  Slot& slot = slots_.at(step.slot);
  if (step.samples) {
    if (sampled.size() != slot.sequence.size()) internalError("generation plan", "a token per row expected");
    for (size_t r = 0; r < slot.sequence.size(); ++r) {
      const int64_t q = slot.sequence[r];
      if (rowEnded(q)) continue;
      auto& t = tokens_[static_cast<size_t>(q)];
      t.push_back(sampled[r]);
      timings_[static_cast<size_t>(q)].tokenMs.push_back(nowMs);
      ++generatedTokens_;
      if (c_.eos && sampled[r] == *c_.eos) finish_[static_cast<size_t>(q)] = "eos";
      else if (static_cast<int64_t>(t.size()) == c_.maxNewTokens) finish_[static_cast<size_t>(q)] = "length";
    }
  }
  slot.position = step.position + step.length;
  if (slot.consumed < slot.promptLength) return prefillStep(step.slot, false);
  bool live = false;
  for (int64_t q : slot.sequence) live |= !rowEnded(q);
  if (live) return decodeStep(step.slot);
  return fill(step.slot, nowMs);
}

bool GenerationPlan::done() const {
  if (!queue_.empty()) return false;
  for (const Slot& s : slots_)
    if (s.active) {
      for (int64_t q : s.sequence)
        if (!rowEnded(q)) return false;
    }
  return true;
}

std::vector<GeneratedSequence> GenerationPlan::sequences() const {
  std::vector<GeneratedSequence> out;
  for (size_t i = 0; i < prompts_.size(); ++i) out.push_back({prompts_[i].id, tokens_[i], finish_[i]});
  return out;
}

}  // namespace pipecut::runtime
