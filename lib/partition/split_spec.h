#pragma once
// The split spec: where to cut. Three spellings (see README, and the JSON
// Schema in schemas/split_spec.schema.json):
//   {"split_points": {"model.layers.1": "END", "model.layers.3": "BEGINNING"}}   (torch.distributed.pipelining)
//   {"stages": [["model.embed_tokens", "model.layers.0"], ["model.layers.1", "lm_head"]]}   (torchtitan)
//   {"split_after_nodes": ["add_7"]}
#include <string>
#include <vector>

namespace pipecut::partition {

enum class SplitWhere { Beginning, End };

struct SplitPoint {
  std::string module;
  SplitWhere where = SplitWhere::End;
};

struct SplitSpec {
  enum class Kind { SplitPoints, Stages, SplitAfterNodes } kind = Kind::SplitPoints;
  std::vector<SplitPoint> splitPoints;            // in file order
  std::vector<std::vector<std::string>> stages;   // module paths per stage
  std::vector<std::string> afterNodes;
  std::string canonical;                          // compact JSON, for the manifest
};

// Throws pipecut::Error (InvalidInput) naming `file` and the offending field.
SplitSpec parseSplitSpec(const std::string& text, const std::string& file);
SplitSpec readSplitSpec(const std::string& path);

}  // namespace pipecut::partition
