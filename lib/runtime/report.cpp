// RunReport as JSON (--json) and as text.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/report.h"

namespace pipecut::runtime {

std::string reportJson(const RunReport& r) {
  nlohmann::json j;
  j["world_size"] = r.world;
  j["backend"] = r.backend;
  j["stages"] = r.stages;
  j["microbatches"] = r.microbatches;
  j["schedule"] = r.schedule;
  j["samples"] = r.samples;
  j["wall_ms"] = r.wallMs;
  if (r.verifyMs >= 0) j["stage_file_check"] = {{"ms", r.verifyMs}, {"bytes", r.verifiedBytes}};
  j["throughput_samples_per_s"] = r.samplesPerSecond;
  j["latency_ms"] = {{"p50", r.latencyP50Ms}, {"p99", r.latencyP99Ms}};
  j["bubble"] = {{"measured", r.bubbleMeasured}, {"theoretical", r.bubbleTheoretical}};
  j["stage_stats"] = nlohmann::json::array();
  for (const auto& s : r.stageStats)
    j["stage_stats"].push_back({{"stage", s.stage}, {"rank", s.rank}, {"device", s.device}, {"format", s.format}, {"busy_ms", s.busyMs},
                                {"busy_fraction", s.busyFraction}});
  j["device_bubble"] = nlohmann::json::array();
  for (const auto& b : r.deviceBubbles)
    j["device_bubble"].push_back({{"rank", b.rank}, {"device", b.device}, {"busy_ms", b.busyMs}, {"bubble", b.bubble}});
  j["peak_memory"] = nlohmann::json::array();
  for (const auto& m : r.memory)
    j["peak_memory"].push_back({{"rank", m.rank}, {"device", m.device}, {"bytes", m.peakBytes},
                                {"kind", m.device.rfind("cuda", 0) == 0 ? "allocated" : "process_rss"}});
  if (r.checked)
    j["check"] = {{"ok", r.checkOk}, {"max_abs_error", r.maxAbsError}, {"message", r.checkMessage}};
  return j.dump(2);
}

std::string reportText(const RunReport& r) {
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf, "%u stages, %d micro-batches (%s), %d process%s: %llu samples in %.1f ms = %.1f samples/s\n",
                r.stages, r.microbatches, r.schedule.c_str(), r.world, r.world == 1 ? "" : "es",
                static_cast<unsigned long long>(r.samples), r.wallMs, r.samplesPerSecond);
  s += buf;
  if (r.latencyP50Ms >= 0) {
    std::snprintf(buf, sizeof buf, "micro-batch latency: p50 %.2f ms, p99 %.2f ms\n", r.latencyP50Ms, r.latencyP99Ms);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "bubble: measured %.3f, theoretical (p-1)/(m+p-1) = %.3f\n", r.bubbleMeasured,
                r.bubbleTheoretical);
  s += buf;
  for (const auto& st : r.stageStats) {
    std::snprintf(buf, sizeof buf, "  stage %u on %s (rank %d): busy %.1f ms (%.0f%%)\n", st.stage, st.device.c_str(),
                  st.rank, st.busyMs, 100 * st.busyFraction);
    s += buf;
  }
  for (const auto& b : r.deviceBubbles) {
    std::snprintf(buf, sizeof buf, "  bubble rank %d %s: %.3f (busy %.1f ms)\n", b.rank, b.device.c_str(), b.bubble, b.busyMs);
    s += buf;
  }
  for (const auto& m : r.memory) {
    std::snprintf(buf, sizeof buf, "  peak memory rank %d %s: %.1f MiB%s\n", m.rank, m.device.c_str(),
                  static_cast<double>(m.peakBytes) / 1048576.0, m.device.rfind("cuda", 0) == 0 ? "" : " (process RSS)");
    s += buf;
  }
  if (r.checked) {
    std::snprintf(buf, sizeof buf, "check: %s (max abs error %.3g)%s%s\n", r.checkOk ? "ok" : "MISMATCH", r.maxAbsError,
                  r.checkMessage.empty() ? "" : ": ", r.checkMessage.c_str());
    s += buf;
  }
  return s;
}

}  // namespace pipecut::runtime
