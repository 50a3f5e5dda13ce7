#pragma once
// Reading the .pt2's JSON records with simdjson (DOM API): a 100k-node
// program is ~200 MB of JSON, which nlohmann's DOM parses and frees in ~5 s
// and simdjson parses in ~0.5 s. These helpers check every type they read
// and fail with pipecut::Error (InvalidInput) at a JSON path, so the readers
// built on them stay exact about where a file is wrong. Literal payloads the
// IR keeps verbatim are converted to nlohmann::json (toJson).
// Only lib/pt2's .cpp files include this (simdjson stays out of the headers
// everyone else sees).
#include <simdjson.h>

#include <string>
#include <string_view>

#include "ir/ir.h"

namespace pipecut::pt2::json {

using Element = simdjson::dom::element;
using Object = simdjson::dom::object;
using Array = simdjson::dom::array;

// A JSON path ("graph_module.graph.nodes[3].inputs[1].arg"), built only when
// an error needs it: a child points at its parent, which lives on the
// caller's stack, so reading a 100k-node program builds no path strings.
// Never keep a path derived from a temporary (w["a"]["b"] dangles once the
// full expression ends); pass such paths straight to a call.
class Path {
 public:
  explicit Path(std::string_view root) : root_(root) {}
  Path operator[](std::string_view key) const;
  Path operator[](size_t index) const;
  // Names the node as well: "... nodes[3] (node 'add_2', torch.ops.aten.add.Tensor)".
  Path node(const ir::Node* n) const;
  std::string str() const;

 private:
  Path() = default;
  const Path* parent_ = nullptr;
  std::string_view root_, key_;
  size_t index_ = static_cast<size_t>(-1);
  const ir::Node* node_ = nullptr;
};

[[noreturn]] void fail(const Path& where, const std::string& message);

// Parses `text` with `parser`, which must outlive every element of the
// result. Syntax errors name the byte offset; nesting deeper than 1024 levels
// is refused. With `readableAfter` >= simdjson::SIMDJSON_PADDING bytes
// readable past the text's end, it is parsed in place (no padded copy).
Element parse(simdjson::dom::parser& parser, std::string_view text, const std::string& where,
              size_t readableAfter = 0);

bool isObject(Element e);
bool isArray(Element e);
bool isString(Element e);
bool isNull(Element e);
bool isInteger(Element e);  // int64, or uint64 within int64
bool isFloat(Element e);    // any number, or "Infinity", "-Infinity", "NaN" (torch's spelling)

// Fail unless e is an object / array.
Object object(Element e, const Path& where);
Array array(Element e, const Path& where);

// A member: fails when absent (null counts as present).
Element field(Element obj, std::string_view key, const Path& where);
// A member that is present and not null: true and `out` set.
bool find(Element obj, std::string_view key, Element& out);
bool has(Element obj, std::string_view key);

std::string_view str(Element e, const Path& where);
int64_t integer(Element e, const Path& where);
bool boolean(Element e, const Path& where);
// Optional fields: absent or null give the default; another type fails at where.key.
bool optBool(Element obj, std::string_view key, bool dflt, const Path& where);
std::string optString(Element obj, std::string_view key, const Path& where);

// The single member of a one-member object ({"as_int": 3}); fails otherwise with `expected`.
std::pair<std::string_view, Element> only(Element e, const Path& where, const char* expected);

// nlohmann::json of the same value (ints stay ints, unsigned stays unsigned,
// floats stay floats: written back, it dumps to the same text).
ir::Json toJson(Element e);

// Tensor metadata (a TensorMeta record), checked: a stride per size, no
// negative size, stride or offset, a known dtype.
ir::TensorMeta tensorMeta(Element j, const Path& where);

}  // namespace pipecut::pt2::json
