#pragma once
// Contiguous min-max partitioning, the exact core of `--balance`: cut a row of
// K units into P non-empty ranges so that the heaviest range is as light as
// possible, and among all partitions that achieve it, the weight of the cuts
// (bytes crossing the boundaries) is least. Pure data; no graph.
#include <cstddef>
#include <functional>
#include <vector>

namespace pipecut::partition {

// Cost of units [a, b). Must be monotone: never smaller for a longer range
// (c(a, b) <= c(a', b') whenever a' <= a and b <= b'). Sums of non-negative
// unit costs are; so is "bytes of the distinct tensors the range reads".
using RangeCost = std::function<double(size_t a, size_t b)>;

struct Partition {
  std::vector<size_t> cuts;  // ascending; cut c separates unit c-1 from unit c
  double maxCost = 0;        // the heaviest range
  double cutWeight = 0;      // sum of cutWeight[c] over the cuts
};

// `cutWeight[c]` (size K; index 0 unused) is the tie-break weight of cutting
// before unit c. Requires 1 <= parts <= units. Deterministic: among partitions
// equal in both objectives, the cuts chosen are the lexicographically smallest.
// `slack` widens the tie: every partition whose heaviest range is within
// optimum * (1 + slack) competes on cut weight (for costs that are estimates,
// where a cut moved past one cheap node can halve the bytes crossing it);
// maxCost is then the chosen partition's own heaviest range.
// O(parts * units * log units) cost evaluations for the min-max (the optimal
// last cut sits where the best prefix cost, non-decreasing in its end, meets
// the last range's cost, non-increasing in its start), and O(parts * units)
// for the tie-break (the feasible starts of the last range form a window
// that only moves right).
Partition partitionMinMax(size_t units, size_t parts, const RangeCost& cost, const std::vector<double>& cutWeight,
                          double slack = 0);

// The same answer for a cost that need not be monotone: one that charges a
// range for what crosses its ends (the transfer term of --balance time) can
// fall when a range grows past a heavy boundary. O(parts * units^2) cost
// evaluations: a dynamic program over every last-range start.
Partition partitionMinMaxAnyCost(size_t units, size_t parts, const RangeCost& cost,
                                 const std::vector<double>& cutWeight, double slack = 0);

}  // namespace pipecut::partition
