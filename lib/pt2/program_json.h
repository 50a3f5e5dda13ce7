#pragma once
// The serialized ExportedProgram (models/<name>.json) <-> ir::Program.
#include <string_view>

#include "ir/ir.h"

namespace pipecut::pt2 {

// The schema major version this reader understands.
constexpr int kSchemaMajor = 8;

// Parses the record's text. Throws pipecut::Error (InvalidInput) naming the
// JSON field, node or value at fault; nesting deeper than 1024 levels is refused.
// `readableAfter`: see json::parse (bytes readable past the text's end).
ir::Program parseProgram(std::string_view text, size_t readableAfter = 0);
// The same from a JSON document (tests build programs as documents).
ir::Program parseProgram(const ir::Json& j);
ir::Json serializeProgram(const ir::Program& p);

ir::Json serializeTensorMeta(const ir::TensorMeta& m);

// The compact single-line encoding torch writes; deterministic (sorted keys).
std::string dumpJson(const ir::Json& j);

}  // namespace pipecut::pt2
