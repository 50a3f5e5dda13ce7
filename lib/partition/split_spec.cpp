#include "partition/split_spec.h"


#include <nlohmann/json.hpp>

#include "support/error.h"
#include "support/files.h"

namespace pipecut::partition {

using Json = nlohmann::json;

SplitSpec parseSplitSpec(const std::string& text, const std::string& file) {
  auto fail = [&](const std::string& where, const std::string& msg) -> void {
    throw Error(ErrorKind::InvalidInput, file, where, msg);
  };
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    fail("", "JSON syntax error at byte " + std::to_string(e.byte));
  } catch (const Json::out_of_range& e) {  // a number beyond double's range, e.g. 1e309
    fail("", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail("", "a split spec must be a JSON object");
  static const char* kKinds[] = {"split_points", "stages", "split_after_nodes"};
  int found = 0;
  for (const char* k : kKinds) found += j.contains(k);
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKinds) known |= it.key() == k;
    if (!known && it.key() != "$schema" && it.key() != "comment")
      fail(it.key(), "unknown field (expected one of split_points, stages, split_after_nodes)");
  }
  if (found != 1) fail("", "give exactly one of split_points, stages, split_after_nodes");

  SplitSpec s;
  if (j.contains("split_points")) {
    s.kind = SplitSpec::Kind::SplitPoints;
    const Json& p = j["split_points"];
    // An empty object means one stage: the whole program (a baseline, or a
    // plain TorchScript export).
    if (!p.is_object()) fail("split_points", "expected an object {module: \"BEGINNING\"|\"END\"}");
    // nlohmann's default object sorts keys; order does not matter for cuts.
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (!it.value().is_string()) fail("split_points." + it.key(), "expected \"BEGINNING\" or \"END\"");
      std::string w = it.value().get<std::string>();
      SplitPoint sp;
      sp.module = it.key();
      if (w == "BEGINNING") sp.where = SplitWhere::Beginning;
      else if (w == "END") sp.where = SplitWhere::End;
      else fail("split_points." + it.key(), "expected \"BEGINNING\" or \"END\", found \"" + w + "\"");
      s.splitPoints.push_back(sp);
    }
  } else if (j.contains("stages")) {
    s.kind = SplitSpec::Kind::Stages;
    const Json& st = j["stages"];
    if (!st.is_array() || st.size() < 2) fail("stages", "expected a list of at least two module lists");
    for (size_t i = 0; i < st.size(); ++i) {
      std::string w = "stages[" + std::to_string(i) + "]";
      if (!st[i].is_array() || st[i].empty()) fail(w, "expected a non-empty list of module names");
      std::vector<std::string> mods;
      for (size_t k = 0; k < st[i].size(); ++k) {
        if (!st[i][k].is_string()) fail(w + "[" + std::to_string(k) + "]", "expected a module name");
        mods.push_back(st[i][k].get<std::string>());
      }
      s.stages.push_back(std::move(mods));
    }
  } else {
    s.kind = SplitSpec::Kind::SplitAfterNodes;
    const Json& n = j["split_after_nodes"];
    if (!n.is_array() || n.empty()) fail("split_after_nodes", "expected a non-empty list of node names");
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].is_string()) fail("split_after_nodes[" + std::to_string(i) + "]", "expected a node name");
      s.afterNodes.push_back(n[i].get<std::string>());
    }
  }
  j.erase("comment");
  j.erase("$schema");
  s.canonical = j.dump();
  return s;
}

SplitSpec readSplitSpec(const std::string& path) { return parseSplitSpec(support::readFile(path, "the split spec"), path); }

}  // namespace pipecut::partition
