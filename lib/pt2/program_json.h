#pragma once
// The serialized ExportedProgram (models/<name>.json) <-> ir::Program.
#include "ir/ir.h"

namespace pipecut::pt2 {

// The schema major version this reader understands.
constexpr int kSchemaMajor = 8;

// Throws pipecut::Error (InvalidInput) naming the JSON field, node or value at fault.
ir::Program parseProgram(const ir::Json& j);
ir::Json serializeProgram(const ir::Program& p);

// Refuses JSON nested more than kMaxJsonDepth levels (InvalidInput at `where`):
// verbatim fields are copied by nlohmann::json, which recurses.
constexpr size_t kMaxJsonDepth = 1000;
void checkJsonDepth(const ir::Json& root, const std::string& where);

ir::TensorMeta parseTensorMeta(const ir::Json& j, const std::string& where);
ir::Json serializeTensorMeta(const ir::TensorMeta& m);

// The compact single-line encoding torch writes; deterministic (sorted keys).
std::string dumpJson(const ir::Json& j);

}  // namespace pipecut::pt2
