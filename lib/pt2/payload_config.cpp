#include "pt2/payload_config.h"

#include "pt2/json_reader.h"
#include "support/error.h"
#include "support/dtypes.h"

namespace pipecut::pt2 {

using ir::Json;

std::optional<uint64_t> requiredStorageBytes(const ir::TensorMeta& m) {
  const support::DType* d = support::dtypeFromCode(m.dtype);
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

std::vector<PayloadEntry> parsePayloadConfig(std::string_view text, const std::string& dir,
                                             const std::string& configRecord, const RecordSizeFn& recordSize) {
  simdjson::dom::parser parser;
  json::Element cfg = json::parse(parser, text, configRecord);
  // Paths read "<record>: config.<fqn>.<field>".
  std::string rootText = configRecord + ": ";
  json::Path wc("config");
  auto fail = [&](const json::Path& where, const std::string& msg) -> void { invalidInput(rootText + where.str(), msg); };
  json::Element config;
  if (!json::isObject(cfg) || !json::find(cfg, "config", config) || !json::isObject(config))
    fail(wc, "expected {\"config\": {...}}");
  std::vector<PayloadEntry> out;
  for (auto kv : json::Object(config.get_object().value_unsafe())) {
    json::Element e = kv.value;
    json::Path w = wc[kv.key];
    try {
      PayloadEntry t;
      t.fqn = std::string(kv.key);
      json::object(e, w);
      json::Element path = json::field(e, "path_name", w);
      t.record = dir + std::string(json::str(path, w["path_name"]));
      t.isParam = json::optBool(e, "is_param", false, w);
      t.usePickle = json::optBool(e, "use_pickle", false, w);
      t.entryJson = simdjson::minify(e);
      std::optional<uint64_t> have = recordSize(t.record);
      if (!have) fail(w["path_name"], "names missing record '" + t.record + "'");
      json::Element metaJson;
      if (json::find(e, "tensor_meta", metaJson)) {
        t.meta = json::tensorMeta(metaJson, w["tensor_meta"]);
        const ir::TensorMeta& m = *t.meta;
        const support::DType* d = support::dtypeFromCode(m.dtype);
        std::string where = t.record + " ('" + t.fqn + "')";
        if (!t.usePickle) {
          if (*have % static_cast<uint64_t>(d->itemSize) != 0)
            invalidInput(where, "record size " + std::to_string(*have) + " is not a multiple of the " + d->torchName +
                                    " element size " + std::to_string(d->itemSize));
          std::optional<uint64_t> need = requiredStorageBytes(m);
          bool concrete = m.isStatic() && !m.storageOffset.isExpr;
          for (const auto& st : m.strides) concrete = concrete && !st.isExpr;
          if (concrete && !need)
            fail(w["tensor_meta"], "sizes and strides " + m.shapeStr() + " span more than 2^64 bytes");
          if (need && *have < *need) {
            if (*have == 0 && m.device.type == "meta") {
              t.external = true;
            } else {
              invalidInput(where, "record holds " + std::to_string(*have) + " bytes but its metadata (" + d->torchName +
                                      " " + m.shapeStr() + (m.device.type == "cpu" ? "" : " on " + m.device.type) +
                                      ") needs " + std::to_string(*need));
            }
          }
        }
      }
      out.push_back(std::move(t));
    } catch (const Error& err) {
      // The json helpers name paths from "config"; prefix the record.
      if (err.where().rfind("config", 0) == 0) invalidInput(rootText + err.where(), err.message());
      throw;
    }
  }
  return out;
}

}  // namespace pipecut::pt2
