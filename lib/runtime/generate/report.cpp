// GenerateReport as JSON (--json) and as text.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/report.h"

namespace pipecut::runtime {

std::string generateReportJson(const GenerateReport& r) {
  nlohmann::json j;
  j["mode"] = "generate";
  j["world_size"] = r.world;
  j["backend"] = r.backend;
  j["stages"] = r.stages;
  j["slots"] = r.slots;
  j["rows_per_slot"] = r.rowsPerSlot;
  j["sampling"] = r.sampling;
  j["sequences"] = r.sequences;
  j["prompt_tokens"] = r.promptTokens;
  j["generated_tokens"] = r.generatedTokens;
  j["steps"] = r.steps;
  j["wall_ms"] = r.wallMs;
  j["prefill_tokens_per_s"] = r.prefillTokensPerSecond;
  j["decode_tokens_per_s"] = r.decodeTokensPerSecond;
  j["ttft_ms"] = {{"p50", r.ttftP50Ms}, {"p99", r.ttftP99Ms}};
  j["inter_token_ms"] = {{"p50", r.itlP50Ms}, {"p99", r.itlP99Ms}};
  j["bubble"] = {{"measured", r.bubbleMeasured}};
  j["stage_stats"] = nlohmann::json::array();
  for (const auto& s : r.stageStats)
    j["stage_stats"].push_back({{"stage", s.stage}, {"rank", s.rank}, {"device", s.device}, {"format", s.format}, {"busy_ms", s.busyMs},
                                {"busy_fraction", s.busyFraction}});
  j["state"] = {{"bytes_per_slot", r.stateBytesPerSlot},
                {"bytes_copied_per_token", r.stateBytesCopiedPerToken},
                {"bytes_zeroed", r.stateBytesZeroed}};
  if (r.checked) j["check"] = {{"ok", r.checkOk}, {"message", r.checkMessage}};
  return j.dump(2);
}

std::string generateReportText(const GenerateReport& r) {
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "%u stages, %d slots of %lld rows (%s), %d process%s: %zu sequences, %llu prompt + %llu generated tokens "
                "in %.1f ms (%llu steps)\n",
                r.stages, r.slots, static_cast<long long>(r.rowsPerSlot), r.sampling.c_str(), r.world,
                r.world == 1 ? "" : "es", r.sequences, static_cast<unsigned long long>(r.promptTokens),
                static_cast<unsigned long long>(r.generatedTokens), r.wallMs, static_cast<unsigned long long>(r.steps));
  out += buf;
  std::snprintf(buf, sizeof buf, "throughput: prefill %.1f tokens/s, decode %.1f tokens/s\n", r.prefillTokensPerSecond,
                r.decodeTokensPerSecond);
  out += buf;
  std::snprintf(buf, sizeof buf, "time to first token: p50 %.2f ms, p99 %.2f ms; inter-token: p50 %.2f ms, p99 %.2f ms\n",
                r.ttftP50Ms, r.ttftP99Ms, r.itlP50Ms, r.itlP99Ms);
  out += buf;
  std::snprintf(buf, sizeof buf, "bubble: measured %.3f\n", r.bubbleMeasured);
  out += buf;
  for (const auto& s : r.stageStats) {
    std::snprintf(buf, sizeof buf, "  stage %u on %s (rank %d): busy %.1f ms (%.0f%%)\n", s.stage, s.device.c_str(), s.rank,
                  s.busyMs, 100 * s.busyFraction);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "state: %llu bytes per slot, %.0f bytes copied per generated token\n",
                static_cast<unsigned long long>(r.stateBytesPerSlot), r.stateBytesCopiedPerToken);
  out += buf;
  if (r.checked) out += r.checkOk ? "check: ok (every token as the reference)\n" : "check: FAILED: " + r.checkMessage + "\n";
  return out;
}

}  // namespace pipecut::runtime
