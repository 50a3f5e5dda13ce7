#pragma once
// What a manifest says of its stages beyond the values that flow between
// them: the modules each stage holds whole, and the lifted tensors that are
// copies of one storage held by several stages (tied groups). Apart from the
// carver because neither needs its boundary state: one reads the stage
// assignment, the other the names of the tensors each stage lifts.
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "manifest/manifest.h"
#include "partition/assign.h"
#include "pt2/package.h"

namespace pipecut::partition {

// Per stage, sorted: the largest modules all of whose nodes (top-level
// nodes of `graph`, as `assignment` places them) run in that stage. A module
// is one a node's nn_module_stack names; it is the largest when no enclosing
// path (at a '.' boundary) is whole in the same stage.
std::vector<std::vector<std::string>> containedModules(const ir::Graph& graph, const Assignment& assignment);

// The storages of `whole` (weights and constants: pt2::Blob::storageKey)
// that two or more stages hold, with every FQN that names
// them. liftedTargets[s]: the FQNs stage s lifts, in any order (repeats
// allowed). Groups ordered by their names; names sorted; stages increasing.
// A name in both tables means its weight (as pt2::TensorIndex).
std::vector<TiedGroup> tiedGroups(const pt2::Package& whole,
                                  const std::vector<std::vector<std::string_view>>& liftedTargets);
// The same from the tensors each stage lifts (entries of `whole`'s tables;
// nullptr for a name no table has), as the carver finds them anyway.
std::vector<TiedGroup> tiedGroups(const pt2::Package& whole,
                                  const std::vector<std::vector<const pt2::StoredTensor*>>& liftedTensors);

}  // namespace pipecut::partition
