// Reading `pipecut-run --profile` output for `pipecut split --balance time`.
#include <cmath>

#include <nlohmann/json.hpp>

#include "partition/balance.h"
#include "support/error.h"
#include "support/files.h"

namespace pipecut::partition {

CostProfile readCostProfile(const std::string& path) {
  auto fail = [&](const std::string& where, const std::string& msg) -> void {
    throw Error(ErrorKind::InvalidInput, path, where, msg);
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(support::readFile(path, "the cost profile"));
  } catch (const nlohmann::json::parse_error& e) {
    fail("", "JSON syntax error at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::out_of_range& e) {
    fail("", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail("", "a profile must be a JSON object (written by pipecut-run --profile)");
  auto text = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) fail(key, "expected a string");
    return j[key].get<std::string>();
  };
  if (text("format") != "pipecut-profile") fail("format", "expected \"pipecut-profile\"");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1)
    fail("version", "expected 1");
  CostProfile p;
  p.file = path;
  p.sourceModel = text("source_model");
  p.sourceSha256 = text("source_sha256");
  if (j.contains("source_directory_sha256")) p.sourceDirectorySha256 = text("source_directory_sha256");
  p.device = text("device");
  if (j.contains("transfer")) {
    const auto& t = j["transfer"];
    if (!t.is_object()) fail("transfer", "expected an object {method, send_ms_per_mib, recv_ms_per_mib}");
    if (!t.contains("method") || !t["method"].is_string()) fail("transfer.method", "expected a string");
    p.transferMethod = t["method"].get<std::string>();
    auto rate = [&](const char* key) {
      std::string where = std::string("transfer.") + key;
      if (!t.contains(key) || !t[key].is_number()) fail(where, "expected a number");
      double v = t[key].get<double>();
      if (!std::isfinite(v) || v < 0) fail(where, "expected a finite time >= 0");
      return v;
    };
    p.sendMsPerMiB = rate("send_ms_per_mib");
    p.recvMsPerMiB = rate("recv_ms_per_mib");
  }
  if (!j.contains("nodes") || !j["nodes"].is_array()) fail("nodes", "expected a list of {name, module, ms}");
  const auto& nodes = j["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string where = "nodes[" + std::to_string(i) + "]";
    const auto& e = nodes[i];
    if (!e.is_object()) fail(where, "expected an object {name, module, ms}");
    if (!e.contains("name") || !e["name"].is_string()) fail(where + ".name", "expected a string");
    if (!e.contains("ms") || !e["ms"].is_number()) fail(where + ".ms", "expected a number");
    double ms = e["ms"].get<double>();
    if (!std::isfinite(ms) || ms < 0) fail(where + ".ms", "expected a finite time >= 0");
    if (!p.ms.emplace(e["name"].get<std::string>(), ms).second)
      fail(where + ".name", "node '" + e["name"].get<std::string>() + "' appears twice");
  }
  return p;
}

}  // namespace pipecut::partition
