#pragma once
// Automatic balancing: `pipecut split --stages N --balance params|flops|time`.
//
// Cut candidates are the module-call boundaries at the granularity where the
// model repeats: the children of its largest list of numbered modules (the
// layers), plus the modules before and after them along the path to that list
// (embedding, final norm, LM head). A unit heavier than a fair stage
// (total / N), or too few candidates for N stages, refines to the unit's own
// children. Then, level by level, units of half a fair stage or heavier
// than the optimum's excess over fair (while that is over 1%) refine too,
// each level kept where it lowers the heaviest stage by more than 1%. Every
// candidate is a position a split point names exactly ("M": BEGINNING or
// END), never inside a higher-order op's body, so the result is an ordinary
// split spec that reproduces the cut by hand.
//
// The partition minimizes the heaviest stage exactly and, among optimal ones
// (for flops and time, estimates: those within 0.1% of the optimum), the
// bytes per sample crossing the cuts (see partition/min_max.h).
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/module_tree.h"
#include "partition/assign.h"
#include "partition/split_spec.h"
#include "pt2/package.h"

namespace pipecut::partition {

enum class BalanceBy { Params, Flops, Time };

// A measured profile (`pipecut-run DIR --profile FILE` of a one-stage split):
// milliseconds per top-level node, keyed by node name, and what moving a MiB
// between ranks costs the sender's and the receiver's CPU (0 when the profile
// has no "transfer": CUDA stages, or a profile written before it existed).
struct CostProfile {
  std::string file;
  std::string sourceModel, sourceSha256, device;
  std::string sourceDirectorySha256;  // empty in profiles written before it existed
  std::unordered_map<std::string, double> ms;
  std::string transferMethod;
  double sendMsPerMiB = 0, recvMsPerMiB = 0;
};
// Throws pipecut::Error (InvalidInput) naming `path` and the field at fault.
CostProfile readCostProfile(const std::string& path);

struct BalanceStage {
  double cost = 0;                 // in BalanceResult::unit
  double transfer = 0;             // of which moving values (--balance time with a transfer rate)
  std::string first, last;         // the first and last unit (module path, "(root)" for glue)
  size_t units = 0;
};

struct BalanceResult {
  BalanceBy by = BalanceBy::Params;
  std::string unit;                // "bytes", "FLOPs", "ms"
  SplitSpec spec;                  // the chosen cuts as split_points
  std::vector<BalanceStage> stages;
  std::vector<uint64_t> cutBytes;  // per cut: bytes per sample crossing it
  std::vector<SplitPoint> candidates;  // every cut considered, in program order
  double imbalance = 1;            // heaviest stage / mean stage
  std::vector<size_t> cutPositions;  // per cut: the first node of the next stage
};

struct BalanceRequest {
  int stages = 1;
  BalanceBy by = BalanceBy::Params;
  const CostProfile* profile = nullptr;  // BalanceBy::Time
  // Partitions whose heaviest stage is within the optimum * (1 + slack)
  // compete on the bytes crossing their cuts (partition/min_max.h). Unset:
  // 0.1% for flops and time, which are estimates (a cut one residual add
  // later sends one tensor instead of two); 0 for params, exact bytes.
  std::optional<double> slack;
};

// `program` is normalized with module calls contiguous (as split needs).
// Throws pipecut::Error (InvalidInput): N < 1, more stages than candidates + 1,
// a node the profile lacks, a FLOP count that needs an unknown size.
BalanceResult balance(const pt2::Package& pkg, const ir::ModuleTree& tree, const BalanceRequest& request);

// The spec the balancer wrote must cut where it chose when read back like a
// user's; `a` is assignStages of b.spec. Throws an internal error otherwise.
void checkReproduces(const BalanceResult& b, const Assignment& a);

BalanceBy parseBalanceBy(const std::string& text);  // throws Usage for anything else
const char* balanceByName(BalanceBy by);

}  // namespace pipecut::partition
