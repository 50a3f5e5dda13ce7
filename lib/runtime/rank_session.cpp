#include "runtime/rank_session.h"

#include <algorithm>
#include <thread>

#include <ATen/Parallel.h>

#include "runtime/rank_exit.h"

namespace pipecut::runtime {

RankSession::RankSession(const DistEnv& env, const std::string& backend, const SessionOptions& o,
                         const RunIdentity& identity)
    : rank_(env.rank) {
  dist_ = std::make_unique<DistContext>(env, backend,
                                        std::chrono::milliseconds(static_cast<int64_t>(o.timeoutSeconds * 1000)), identity);
  dist_->watch([this](const std::string& why) { stopRank(*dist_, rank_, why, kStopGrace); });
}

void RankSession::fail(const std::exception& e) { failRankOn(*dist_, rank_, e); }

int setIntraOpThreads(int requested, size_t localWorkers) {
  int n = requested;
  if (n <= 0) {
    int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int localWorld = std::max(1, DistEnv::fromEnvironment().localWorld);
    n = std::max(1, cores / (std::max<int>(1, static_cast<int>(localWorkers)) * localWorld));
  }
  at::set_num_threads(n);
  return n;
}

}  // namespace pipecut::runtime
