#include "pt2/payload_config.h"

#include "pt2/program_json.h"
#include "support/error.h"

namespace pipecut::pt2 {

using ir::Json;


std::optional<uint64_t> requiredStorageBytes(const ir::TensorMeta& m) {
  const ir::DTypeInfo* d = ir::dtypeInfo(m.dtype);
  if (!d || m.storageOffset.isExpr || m.strides.size() != m.sizes.size()) return std::nullopt;
  // 128-bit arithmetic: sizes and strides are each below 2^63, so one product
  // fits, and a running sum of such products is checked after every step.
  using Wide = unsigned __int128;
  constexpr Wide kMax = static_cast<Wide>(UINT64_MAX);
  Wide extent = 1;
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    if (m.sizes[i].isExpr || m.strides[i].isExpr) return std::nullopt;
    if (m.sizes[i].value == 0) return 0;
  }
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    extent += static_cast<Wide>(m.sizes[i].value - 1) * static_cast<Wide>(m.strides[i].value);
    if (extent > kMax) return std::nullopt;
  }
  Wide bytes = (extent + static_cast<Wide>(m.storageOffset.value)) * static_cast<Wide>(d->itemSize);
  if (bytes > kMax) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::vector<PayloadEntry> parsePayloadConfig(const Json& cfg, const std::string& dir, const std::string& configRecord,
                                             const RecordSizeFn& recordSize) {
  auto fail = [&](const std::string& where, const std::string& msg) -> void {
    invalidInput(configRecord + ": " + where, msg);
  };
  auto optBool = [&](const Json& e, const char* key, const std::string& w) {
    auto it = e.find(key);
    if (it == e.end() || it->is_null()) return false;
    if (!it->is_boolean()) fail(w + "." + key, "expected a bool");
    return it->get<bool>();
  };
  if (!cfg.is_object() || !cfg.contains("config") || !cfg["config"].is_object())
    fail("config", "expected {\"config\": {...}}");
  checkJsonDepth(cfg, configRecord + ": config");
  std::vector<PayloadEntry> out;
  for (auto it = cfg["config"].begin(); it != cfg["config"].end(); ++it) {
    const std::string& fqn = it.key();
    const Json& e = it.value();
    std::string w = "config." + fqn;
    if (!e.is_object()) fail(w, "expected a JSON object");
    if (!e.contains("path_name")) fail(w, "missing field 'path_name'");
    if (!e["path_name"].is_string()) fail(w + ".path_name", "expected a string");
    PayloadEntry t;
    t.fqn = fqn;
    t.entry = e;
    t.isParam = optBool(e, "is_param", w);
    t.usePickle = optBool(e, "use_pickle", w);
    t.record = dir + e["path_name"].get<std::string>();
    std::optional<uint64_t> have = recordSize(t.record);
    if (!have) fail(w + ".path_name", "names missing record '" + t.record + "'");
    if (e.contains("tensor_meta") && !e["tensor_meta"].is_null()) {
      try {
        t.meta = parseTensorMeta(e["tensor_meta"], w + ".tensor_meta");
      } catch (const Error& err) {
        fail(err.where(), err.message());
      }
      const ir::TensorMeta& m = *t.meta;
      const ir::DTypeInfo* d = ir::dtypeInfo(m.dtype);
      std::string where = t.record + " ('" + fqn + "')";
      if (!t.usePickle) {
        if (*have % static_cast<uint64_t>(d->itemSize) != 0)
          invalidInput(where, "record size " + std::to_string(*have) + " is not a multiple of the " + d->torchName +
                                  " element size " + std::to_string(d->itemSize));
        std::optional<uint64_t> need = requiredStorageBytes(m);
        bool concrete = m.isStatic() && !m.storageOffset.isExpr;
        for (const auto& st : m.strides) concrete = concrete && !st.isExpr;
        if (concrete && !need)
          fail(w + ".tensor_meta", "sizes and strides " + m.shapeStr() + " span more than 2^64 bytes");
        if (need && *have < *need)
          invalidInput(where, "record holds " + std::to_string(*have) + " bytes but its metadata (" + d->torchName + " " +
                                  m.shapeStr() + ") needs " + std::to_string(*need));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace pipecut::pt2
