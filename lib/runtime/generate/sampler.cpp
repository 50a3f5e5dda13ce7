#include "runtime/generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace pipecut::runtime {

uint64_t sequenceKey(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

double uniformDraw(uint64_t seed, uint64_t key, int64_t position) {
  uint64_t x = seed ^ (key * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(position) * 0xC2B2AE3D27D4EB4Full);
  // splitmix64's finalizer, twice: neighbouring positions give unrelated draws.
  for (int i = 0; i < 2; ++i) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

int64_t sampleToken(const float* logits, size_t vocab, const SamplerOptions& o, uint64_t key, int64_t position) {
  if (o.sampling == Sampling::Greedy) {
    size_t best = 0;
    for (size_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best] || (std::isnan(logits[i]) && !std::isnan(logits[best]))) best = i;
    return static_cast<int64_t>(best);
  }
  // Softmax of logits / T in double, probabilities sorted high to low (ties
  // by index), the smallest prefix reaching top-p kept, one draw over it.
  double peak = -INFINITY;
  for (size_t i = 0; i < vocab; ++i) peak = std::max(peak, static_cast<double>(logits[i]) / o.temperature);
  std::vector<double> p(vocab);
  double total = 0;
  for (size_t i = 0; i < vocab; ++i) total += p[i] = std::exp(static_cast<double>(logits[i]) / o.temperature - peak);
  std::vector<size_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  double kept = 0;
  size_t n = 0;
  while (n < vocab && (n == 0 || kept < o.topP * total)) kept += p[order[n++]];
  double u = uniformDraw(o.seed, key, position) * kept, cum = 0;
  for (size_t k = 0; k < n; ++k) {
    cum += p[order[k]];
    if (u < cum) return static_cast<int64_t>(order[k]);
  }
  return static_cast<int64_t>(order[n - 1]);
}

}  // namespace pipecut::runtime
