#pragma once
// Edits of a program's top-level graph that keep it well formed, shared by
// the passes that merge or drop values.
#include <vector>

#include "ir/ir.h"

namespace pipecut::ir {

// Every top-level use of `from` (node inputs, graph outputs, output specs,
// user-input specs) now reads `to`. Nested graphs are closed scopes: they
// never use a parent's value, so they are not visited.
void replaceAllUses(Program& p, Value* from, Value* to);

// Removes the placeholders (and their signature entries) marked in `drop`
// (one flag per input spec); with pruneValues false, leaves their values to
// the caller.
void dropInputs(Program& p, const std::vector<bool>& drop, bool pruneValues = true);

}  // namespace pipecut::ir
