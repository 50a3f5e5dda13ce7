#pragma once
// Operator support (`--support TARGET`): which nodes a target takes and why
// not, and the runs of supported and unsupported nodes that
// `pipecut split --support` cuts at, as torch.fx's splitter
// (splitter_base.py) does.
//
// A target is a stage format's rules (built in: driver/support_targets.h)
// or a user's dictionary in fx's OperatorSupport shape. A node's verdict is
// the target's rule for that node alone; a higher-order op is supported
// when the target takes the op itself and every node of its bodies.
// Nodes that compute only sizes (every output a symbolic int, float or
// bool) and export's own guards (aten._assert_tensor_metadata, ...: they
// restate what export saw, ir/op_traits.h) are taken by every target: a
// dictionary needs no entry for them.
//
// Runs (supportRuns), over the top-level nodes in program order:
//   1. nodes that exchange a value that is not a tensor (a symbolic size)
//      form one group (the fx splitter's fusion groups), and no stage
//      boundary may fall between a group's first and last node: a span
//      that holds an unsupported node is unsupported, all of it;
//   2. a supported run of fewer than minSupportedNodes compute nodes (nodes
//      with a tensor output, bodies counted) becomes unsupported, joining its
//      neighbours (fx's min_acc_module_size);
//   3. runs are maximal: neighbours differ in support.
// Every run is wholly supported or holds an unsupported node.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "partition/assign.h"

namespace pipecut::partition {

// Where a node sits: the innermost higher-order op whose body holds it
// (nullptr at top level).
struct NodeContext {
  const ir::Node* enclosing = nullptr;
};

class SupportTarget {
 public:
  virtual ~SupportTarget() = default;
  // As the manifest and the reports name it: "aoti", "dictionary ops.json".
  virtual std::string name() const = 0;
  // Why the target does not take `n` itself (its bodies aside), or nullopt.
  // May throw pipecut::Error (InvalidInput) for a rule that does not fit the
  // node (a dictionary's list longer than the operator's arguments).
  virtual std::optional<std::string> refuses(const ir::Node& n, const NodeContext& ctx) const = 0;
};

// A dictionary in fx's OperatorSupport shape:
//   {"aten.linear.default": null, "aten.gelu.default": [["bfloat16", "float32"]]}
// Keys are operator names as `pipecut inspect` prints them (higher-order ops
// as "higher_order.cond"). null takes any dtypes; a list has one entry per
// positional argument of the operator: null for any, or the dtype names the
// argument's tensor may have (an entry for an argument that is not a tensor
// must be null). An operator it does not name is unsupported. Throws
// pipecut::Error (InvalidInput) naming `file` and the key: not JSON, not an
// object, an unknown dtype name, an entry of the wrong shape; and, when
// applied, a list longer than the operator's arguments or a dtype list for
// an argument that is not a tensor.
//
// Where the operator's schema is known (`signatures`: LibTorch's registry,
// emit::operatorSignature), lists are checked against it as they are read;
// for another operator, against each node that calls it.
struct OperatorSignature {
  std::vector<std::string> names;  // positional arguments, in order
  std::vector<bool> tensor;        // whether each takes a tensor (or an optional one)
};
using SignatureLookup = std::function<std::optional<OperatorSignature>(const std::string& op)>;
std::unique_ptr<SupportTarget> dictionaryTarget(const std::string& text, const std::string& file,
                                                const SignatureLookup& signatures = {});

// Whether a node only computes sizes (see above).
bool computesSizesOnly(const ir::Node& n);

struct NodeVerdict {
  const ir::Node* node = nullptr;  // at any depth
  size_t top = 0;                  // the top-level node that holds it (its position)
  int depth = 0;                   // 0 at top level
  bool supported = true;
  std::string reason;              // why not; empty when supported
};

struct SupportMarks {
  std::string target;
  std::vector<char> supported;      // per top-level node, in program order
  std::vector<std::string> reason;  // per top-level node: why not ("" when supported)
  std::vector<NodeVerdict> nodes;   // every node, preorder (a body's nodes after their op)
};

// Throws what the target's rules throw.
SupportMarks markSupport(const ir::Program& program, const SupportTarget& target);

struct SupportRuns {
  std::vector<int> runOf;                // per top-level node
  std::vector<char> runSupported;        // per run
  std::vector<std::string> runReason;    // per run: its first unsupported node's reason
};

// `marks.supported` and `marks.reason` are updated for nodes steps 1 and 2
// make unsupported (the reason says which rule).
SupportRuns supportRuns(const ir::Program& program, SupportMarks& marks, size_t minSupportedNodes);

// The stages of `a` cut again wherever a run ends: stage (a's stage, run)
// ranked lexicographically, which keeps data flowing forward (a's does, and
// runs follow program order). Per new stage: whether its run is supported,
// and why not (its first unsupported node, from `marks`).
struct SupportedAssignment {
  Assignment assignment;
  std::vector<char> stageSupported;
  std::vector<std::string> stageReason;
};
SupportedAssignment cutAtRuns(const ir::Program& program, const Assignment& a, const SupportRuns& runs,
                              const SupportMarks& marks);

}  // namespace pipecut::partition
