#pragma once
// What a stage's failure at run time says, pulled out of LibTorch's text: the
// node that failed and the cause, so that an operator refusing its input (an
// index out of range, a dtype NativeRT did not expect) is reported as
// "stage 1: node 'embedding': index out of range in self" (exit 2), not as
// an internal error whose cause is on the 12th line. Torch-free: the texts
// come in as strings (and are fuzzed as such).
//
// The two shapes parsed:
// - TorchScript: "The following operation failed in the TorchScript
//   interpreter." then a traceback of the serialized code whose failing line
//   is marked by a "~~~ <--- HERE" line under it, and the cause last
//   ("RuntimeError: index out of range in self"). The emitter names every
//   value after the program's (emit/torchscript.cpp), so the assignment's
//   left side is the node.
// - NativeRT: "Exception while executing node: %embedding = torch.ops.aten.
//   embedding.default(...)" then the cause.
#include <string>

namespace pipecut::runtime {

struct StageFailure {
  std::string node;        // "" when the text names none
  std::string expression;  // the failing call as printed ("torch.embedding(weight, input_ids)"), or ""
  std::string cause;       // never empty: the operator's own first line when found, else the text's first line
};

StageFailure parseStageFailure(const std::string& text);

// "node 'embedding' (torch.embedding(weight, input_ids))", or "" with no node.
std::string describeFailingNode(const StageFailure& f);

}  // namespace pipecut::runtime
