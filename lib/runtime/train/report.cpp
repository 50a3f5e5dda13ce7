// TrainReport as JSON (--json) and as text.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/report.h"

namespace pipecut::runtime {

std::string trainReportJson(const TrainReport& r) {
  nlohmann::json j;
  j["mode"] = "train";
  j["world_size"] = r.world;
  j["backend"] = r.backend;
  j["stages"] = r.stages;
  j["workers"] = r.workers;
  j["microbatches"] = r.microbatches;
  j["schedule"] = r.schedule;
  j["optimizer"] = r.optimizer;
  j["first_step"] = r.firstStep;
  j["steps"] = r.losses.size();
  j["losses"] = r.losses;
  j["samples"] = r.samples;
  j["wall_ms"] = r.wallMs;
  j["throughput_samples_per_s"] = r.samplesPerSecond;
  j["steps_per_s"] = r.stepsPerSecond;
  j["step_ms"] = r.stepMs;
  if (r.stepMs.size() > 1) j["steady_throughput_samples_per_s"] = r.steadySamplesPerSecond;
  j["bubble"] = {{"measured", r.bubbleMeasured}};
  j["stage_stats"] = nlohmann::json::array();
  for (size_t i = 0; i < r.stageStats.size(); ++i) {
    const auto& s = r.stageStats[i];
    nlohmann::json row = {{"stage", s.stage}, {"rank", s.rank}, {"device", s.device}, {"busy_ms", s.busyMs},
                          {"busy_fraction", s.busyFraction},
                          {"peak_activations", i < r.peakActivations.size() ? r.peakActivations[i] : 0}};
    if (!s.format.empty()) row["format"] = s.format;
    if (s.savedActivationBytes >= 0) row["saved_activation_bytes"] = s.savedActivationBytes;
    if (s.heldForWeightsBytes >= 0) row["held_for_weights_bytes"] = s.heldForWeightsBytes;
    j["stage_stats"].push_back(std::move(row));
  }
  j["plan"] = r.plan;
  if (!r.checkpoint.empty()) j["checkpoint"] = r.checkpoint;
  return j.dump(2);
}

std::string trainReportText(const TrainReport& r) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "trained %zu step(s) from step %llu: %u stages, %u workers, %d micro-batches, %s, %s, backend %s\n",
                r.losses.size(), static_cast<unsigned long long>(r.firstStep), r.stages, r.workers, r.microbatches,
                r.schedule.c_str(), r.optimizer.c_str(), r.backend.c_str());
  out += buf;
  for (size_t k = 0; k < r.losses.size(); ++k) {
    std::snprintf(buf, sizeof buf, "  step %llu: loss %.6f\n", static_cast<unsigned long long>(r.firstStep + k), r.losses[k]);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%.1f samples/s (%.1f after the first step), %.2f steps/s, wall %.1f ms, bubble %.3f\n",
                r.samplesPerSecond, r.steadySamplesPerSecond, r.stepsPerSecond, r.wallMs, r.bubbleMeasured);
  out += buf;
  for (size_t i = 0; i < r.stageStats.size(); ++i) {
    const auto& s = r.stageStats[i];
    std::snprintf(buf, sizeof buf, "  stage %u (rank %d, %s): busy %.1f ms (%.0f%%), at most %u micro-batch(es) held\n", s.stage,
                  s.rank, s.device.c_str(), s.busyMs, 100 * s.busyFraction,
                  i < r.peakActivations.size() ? r.peakActivations[i] : 0);
    out += buf;
  }
  if (!r.checkpoint.empty()) out += "checkpoint: " + r.checkpoint + "\n";
  return out;
}

}  // namespace pipecut::runtime
