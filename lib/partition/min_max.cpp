#include "partition/min_max.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>

#include "support/error.h"

namespace pipecut::partition {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// The least possible heaviest range: f[s][b] = best max over units [0, b) in s ranges.
double optimalMax(size_t K, size_t P, const RangeCost& cost) {
  std::vector<double> prev(K + 1, kInf), cur(K + 1, kInf);
  for (size_t b = 1; b <= K; ++b) prev[b] = cost(0, b);
  for (size_t s = 2; s <= P; ++s) {
    std::fill(cur.begin(), cur.end(), kInf);
    for (size_t b = s; b <= K; ++b) {
      // The last range is [a, b), a in [s-1, b-1]. prev[a] rises with a and
      // cost(a, b) falls: the best a is where they cross.
      size_t lo = s - 1, hi = b - 1, first = b;  // first a with prev[a] >= cost(a, b)
      while (lo <= hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (prev[mid] >= cost(mid, b)) {
          first = mid;
          if (mid == 0) break;
          hi = mid - 1;
        } else {
          lo = mid + 1;
        }
      }
      double best = kInf;
      if (first < b) best = std::min(best, std::max(prev[first], cost(first, b)));
      size_t before = first < b ? first : b;  // the last a where prev[a] < cost(a, b)
      if (before > s - 1) best = std::min(best, std::max(prev[before - 1], cost(before - 1, b)));
      cur[b] = best;
    }
    std::swap(prev, cur);
  }
  return prev[K];
}

// Reads the cuts out of g (g[s][a]: least cut weight to cut units [a, K) into
// s ranges within the bound, the optimum plus any slack; kInf where none
// does) left to right, taking at each step the first next cut b that
// attains g[s][a]: among the partitions within the bound, the
// lexicographically smallest cuts. `fits(a, b)`: range [a, b)
// stays within the bound (not monotone in b for every cost: a filter).
void readCuts(Partition& out, size_t K, size_t P, const std::function<bool(size_t, size_t)>& fits,
              const std::vector<double>& cutWeight, const std::vector<std::vector<double>>& g, const char* who) {
  if (g[P][0] == kInf) internalError(who, "no partition meets the optimum it was computed from");
  out.cutWeight = g[P][0];
  size_t a = 0;
  for (size_t s = P; s > 1; --s) {
    size_t next = 0;
    for (size_t b = a + 1; b + s - 1 <= K; ++b)
      if (g[s - 1][b] < kInf && fits(a, b) && cutWeight[b] + g[s - 1][b] == g[s][a]) {
        next = b;
        break;
      }
    if (next == 0) internalError(who, "lost the optimal cut while reading it back");
    out.cuts.push_back(next);
    a = next;
  }
}

// The heaviest range of the partition `cuts` makes.
double heaviest(const std::vector<size_t>& cuts, size_t K, const RangeCost& cost) {
  double mx = 0;
  size_t a = 0;
  for (size_t c : cuts) {
    mx = std::max(mx, cost(a, c));
    a = c;
  }
  return std::max(mx, cost(a, K));
}

}  // namespace

Partition partitionMinMax(size_t K, size_t P, const RangeCost& cost, const std::vector<double>& cutWeight,
                          double slack) {
  if (P < 1 || P > K) internalError("partitionMinMax", "needs 1 <= parts <= units");
  if (cutWeight.size() != K) internalError("partitionMinMax", "one cut weight per unit");
  Partition out;
  const double bound = optimalMax(K, P, cost) * (1 + slack);

  // hi[a]: the furthest end b of a range starting at a that stays within
  // the bound. A single unit always does (every partition holds it whole),
  // and hi only moves right as a does.
  std::vector<size_t> hi(K);
  for (size_t a = 0, b = 1; a < K; ++a) {
    b = std::max(b, a + 1);
    while (b < K && cost(a, b + 1) <= bound) ++b;
    hi[a] = b;
  }
  // g[s][a]: least cut weight to cut units [a, K) into s ranges within bound,
  // counted from the right so that the cuts can be read left to right and
  // the first minimizer taken at each step (lexicographically smallest).
  std::vector<std::vector<double>> g(P + 1, std::vector<double>(K + 1, kInf));
  for (size_t a = 0; a < K; ++a) g[1][a] = hi[a] == K ? 0 : kInf;
  for (size_t s = 2; s <= P; ++s) {
    // Next cut b in [a+1, min(hi[a], K-s+1)]; both ends move right with a.
    std::deque<size_t> window;  // indices b with increasing value w[b] + g[s-1][b]
    size_t pushed = 0;          // every b <= pushed has been offered
    auto value = [&](size_t b) { return cutWeight[b] + g[s - 1][b]; };
    for (size_t a = 0; a + s <= K; ++a) {
      size_t end = std::min(hi[a], K - s + 1);
      while (pushed < end) {
        ++pushed;
        while (!window.empty() && value(window.back()) > value(pushed)) window.pop_back();
        window.push_back(pushed);
      }
      while (!window.empty() && window.front() <= a) window.pop_front();
      g[s][a] = window.empty() ? kInf : value(window.front());
    }
  }
  readCuts(out, K, P, [&](size_t a, size_t b) { return b <= hi[a]; }, cutWeight, g, "partitionMinMax");
  out.maxCost = heaviest(out.cuts, K, cost);
  return out;
}

Partition partitionMinMaxAnyCost(size_t K, size_t P, const RangeCost& cost, const std::vector<double>& cutWeight,
                                 double slack) {
  if (P < 1 || P > K) internalError("partitionMinMaxAnyCost", "needs 1 <= parts <= units");
  if (cutWeight.size() != K) internalError("partitionMinMaxAnyCost", "one cut weight per unit");
  // f[b]: the least heaviest range over units [0, b) in s ranges.
  std::vector<double> f(K + 1, kInf), next(K + 1, kInf);
  for (size_t b = 1; b <= K; ++b) f[b] = cost(0, b);
  for (size_t s = 2; s <= P; ++s) {
    std::fill(next.begin(), next.end(), kInf);
    for (size_t b = s; b <= K; ++b)
      for (size_t a = s - 1; a < b; ++a) next[b] = std::min(next[b], std::max(f[a], cost(a, b)));
    std::swap(f, next);
  }
  Partition out;
  const double bound = f[K] * (1 + slack);
  // g[s][a]: least cut weight to cut units [a, K) into s ranges within bound,
  // from the right, so that reading left to right with the first minimizer
  // gives the lexicographically smallest cuts (as partitionMinMax does).
  std::vector<std::vector<double>> g(P + 1, std::vector<double>(K + 1, kInf));
  for (size_t a = 0; a < K; ++a) g[1][a] = cost(a, K) <= bound ? 0 : kInf;
  for (size_t s = 2; s <= P; ++s)
    for (size_t a = 0; a + s <= K; ++a)
      for (size_t b = a + 1; b + s - 1 <= K; ++b)
        if (g[s - 1][b] < kInf && cost(a, b) <= bound) g[s][a] = std::min(g[s][a], cutWeight[b] + g[s - 1][b]);
  readCuts(out, K, P, [&](size_t a, size_t b) { return cost(a, b) <= bound; }, cutWeight, g, "partitionMinMaxAnyCost");
  out.maxCost = heaviest(out.cuts, K, cost);
  return out;
}

}  // namespace pipecut::partition
