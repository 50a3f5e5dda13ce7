#include "pt2/json_reader.h"

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "support/dtypes.h"

namespace pipecut::pt2::json {

using simdjson::dom::element_type;

Path Path::operator[](std::string_view key) const {
  Path p;
  p.parent_ = this;
  p.key_ = key;
  return p;
}

Path Path::operator[](size_t index) const {
  Path p;
  p.parent_ = this;
  p.index_ = index;
  return p;
}

Path Path::node(const ir::Node* n) const {
  Path p = *this;
  p.node_ = n;
  return p;
}

std::string Path::str() const {
  std::string out = parent_ ? parent_->str() : std::string(root_);
  if (parent_ && index_ != static_cast<size_t>(-1)) {
    out += "[" + std::to_string(index_) + "]";
  } else if (parent_) {
    if (!out.empty()) out += '.';
    out += key_;
  }
  if (node_) out += " (node '" + node_->label() + "', " + node_->target + ")";
  return out;
}

void fail(const Path& where, const std::string& message) { invalidInput(where.str(), message); }

Element parse(simdjson::dom::parser& parser, std::string_view text, const std::string& where,
              size_t readableAfter) {
  const bool inPlace = readableAfter >= simdjson::SIMDJSON_PADDING;
  auto result = parser.parse(text.data(), text.size(), /*realloc_if_needed=*/!inPlace);
  if (!result.error()) return result.value_unsafe();
  if (result.error() == simdjson::DEPTH_ERROR)
    invalidInput(where, "JSON nested more than " + std::to_string(parser.max_depth()) + " levels deep");
  // simdjson does not say where; nlohmann does (this path runs only on bad files).
  try {
    [[maybe_unused]] ir::Json parsed = ir::Json::parse(text);  // only for its error, which names the byte
  } catch (const ir::Json::parse_error& e) {
    std::string what = e.what();
    invalidInput(where, "JSON syntax error at byte " + std::to_string(e.byte) + ": " + what.substr(what.find(':') + 2));
  } catch (const ir::Json::exception& e) {
    std::string what = e.what();
    invalidInput(where, "invalid JSON: " + what.substr(what.find(']') + 2));
  }
  invalidInput(where, std::string("invalid JSON: ") + simdjson::error_message(result.error()));
}

bool isObject(Element e) { return e.type() == element_type::OBJECT; }
bool isArray(Element e) { return e.type() == element_type::ARRAY; }
bool isString(Element e) { return e.type() == element_type::STRING; }
bool isNull(Element e) { return e.type() == element_type::NULL_VALUE; }

bool isInteger(Element e) {
  if (e.type() == element_type::INT64) return true;
  return e.type() == element_type::UINT64 && e.get_uint64().value_unsafe() <= static_cast<uint64_t>(INT64_MAX);
}

bool isFloat(Element e) {
  switch (e.type()) {
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return true;
    case element_type::STRING: {
      std::string_view s = e.get_string().value_unsafe();
      return s == "Infinity" || s == "-Infinity" || s == "NaN";
    }
    default:
      return false;
  }
}

Object object(Element e, const Path& where) {
  if (!isObject(e)) fail(where, "expected a JSON object");
  return e.get_object().value_unsafe();
}

Array array(Element e, const Path& where) {
  if (!isArray(e)) fail(where, "expected a JSON array");
  return e.get_array().value_unsafe();
}

Element field(Element obj, std::string_view k, const Path& where) {
  auto r = object(obj, where).at_key(k);
  if (r.error()) fail(where, "missing field '" + std::string(k) + "'");
  return r.value_unsafe();
}

bool find(Element obj, std::string_view k, Element& out) {
  if (!isObject(obj)) return false;
  auto r = obj.get_object().value_unsafe().at_key(k);
  if (r.error() || isNull(r.value_unsafe())) return false;
  out = r.value_unsafe();
  return true;
}

bool has(Element obj, std::string_view k) {
  Element e;
  return find(obj, k, e);
}

std::string_view str(Element e, const Path& where) {
  if (!isString(e)) fail(where, "expected a string");
  return e.get_string().value_unsafe();
}

int64_t integer(Element e, const Path& where) {
  if (!isInteger(e)) fail(where, "expected an integer");
  if (e.type() == element_type::UINT64) return static_cast<int64_t>(e.get_uint64().value_unsafe());
  return e.get_int64().value_unsafe();
}

bool boolean(Element e, const Path& where) {
  if (e.type() != element_type::BOOL) fail(where, "expected a bool");
  return e.get_bool().value_unsafe();
}

bool optBool(Element obj, std::string_view k, bool dflt, const Path& where) {
  Element e;
  if (!find(obj, k, e)) return dflt;
  return boolean(e, where[k]);
}

std::string optString(Element obj, std::string_view k, const Path& where) {
  Element e;
  if (!find(obj, k, e)) return {};
  return std::string(str(e, where[k]));
}

std::pair<std::string_view, Element> only(Element e, const Path& where, const char* expected) {
  if (!isObject(e)) fail(where, expected);
  Object o = e.get_object().value_unsafe();
  if (o.size() != 1) fail(where, expected);
  auto kv = *o.begin();
  return {kv.key, kv.value};
}

ir::Json toJson(Element e) {
  switch (e.type()) {
    case element_type::ARRAY: {
      ir::Json out = ir::Json::array();
      for (Element x : json::Array(e.get_array().value_unsafe())) out.push_back(toJson(x));
      return out;
    }
    case element_type::OBJECT: {
      ir::Json out = ir::Json::object();
      for (auto kv : json::Object(e.get_object().value_unsafe())) out[std::string(kv.key)] = toJson(kv.value);
      return out;
    }
    case element_type::INT64: return e.get_int64().value_unsafe();
    case element_type::UINT64: return e.get_uint64().value_unsafe();
    case element_type::DOUBLE: return e.get_double().value_unsafe();
    case element_type::STRING: return std::string(e.get_string().value_unsafe());
    case element_type::BOOL: return e.get_bool().value_unsafe();
    case element_type::NULL_VALUE: return nullptr;
  }
  return nullptr;
}

namespace {

ir::SymInt symInt(Element j, const Path& where) {
  ir::SymInt s;
  auto [k, v] = only(j, where, "expected a SymInt ({\"as_int\"} or {\"as_expr\"})");
  if (k == "as_int") {
    s.value = integer(v, where["as_int"]);
  } else if (k == "as_expr") {
    s.isExpr = true;
    Path w = where["as_expr"];
    s.expr = std::string(str(field(v, "expr_str", w), w["expr_str"]));
    Element hint;
    if (find(v, "hint", hint)) s.hint = toJson(hint);
  } else {
    fail(where, "unknown SymInt variant '" + std::string(k) + "'");
  }
  return s;
}

}  // namespace

ir::TensorMeta tensorMeta(Element j, const Path& w) {
  ir::TensorMeta m;
  int64_t dtype = integer(field(j, "dtype", w), w["dtype"]);
  m.dtype = dtype < 0 || dtype > 255 ? -1 : static_cast<int>(dtype);
  if (!support::dtypeFromCode(m.dtype)) fail(w["dtype"], "unknown dtype code " + std::to_string(dtype));
  {
    Path ws = w["sizes"];
    size_t i = 0;
    Array sizes = array(field(j, "sizes", w), ws);
    m.sizes.reserve(sizes.size());
    for (Element s : sizes) m.sizes.push_back(symInt(s, ws[i++]));
  }
  {
    // Required, as in torch's schema: a 0-d tensor has [] and nothing else does.
    Path ws = w["strides"];
    size_t i = 0;
    Array strides = array(field(j, "strides", w), ws);
    m.strides.reserve(strides.size());
    for (Element s : strides) m.strides.push_back(symInt(s, ws[i++]));
  }
  Element e;
  if (find(j, "storage_offset", e)) m.storageOffset = symInt(e, w["storage_offset"]);
  m.requiresGrad = optBool(j, "requires_grad", false, w);
  if (find(j, "device", e)) {
    Path wd = w["device"];
    m.device.type = std::string(str(field(e, "type", wd), wd["type"]));
    Element idx;
    if (find(e, "index", idx)) m.device.index = integer(idx, wd["index"]);
  }
  if (find(j, "layout", e)) m.layout = static_cast<int>(integer(e, w["layout"]));
  // Everything downstream (byte counts, from_blob/as_strided in the emitter,
  // the runner's shapes) trusts these, so they are checked here, once.
  Path ws = w["sizes"], wt = w["strides"];
  for (size_t i = 0; i < m.sizes.size(); ++i)
    if (!m.sizes[i].isExpr && m.sizes[i].value < 0) fail(ws[i], "negative size " + std::to_string(m.sizes[i].value));
  if (m.strides.size() != m.sizes.size())
    fail(wt, std::to_string(m.strides.size()) + " strides for " + std::to_string(m.sizes.size()) + " sizes");
  for (size_t i = 0; i < m.strides.size(); ++i)
    if (!m.strides[i].isExpr && m.strides[i].value < 0)
      fail(wt[i], "negative stride " + std::to_string(m.strides[i].value));
  if (!m.storageOffset.isExpr && m.storageOffset.value < 0)
    fail(w["storage_offset"], "negative storage offset " + std::to_string(m.storageOffset.value));
  return m;
}

}  // namespace pipecut::pt2::json
