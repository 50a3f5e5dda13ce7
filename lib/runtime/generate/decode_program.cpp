// The decode-step reading of a manifest (runtime/generate/decode_program.h).
#include "runtime/generate/decode_program.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "support/error.h"

namespace pipecut::runtime {

DecodeProgram readDecodeProgram(const Manifest& m, const std::string& dir, const std::string& option) {
  auto bad = [&](const std::string& where, const std::string& why) -> void {
    throw Error(ErrorKind::InvalidInput, dir, where,
                why + "; " + option + " takes a decode step exported with its static cache (inputs input_ids [B, T] and "
                      "cache_position [T], logits [B, T, vocab] first; see the export recipe in docs/generation.md)");
  };
  DecodeProgram d;
  if (m.inputs.size() != 2) bad("manifest inputs", "the program takes " + std::to_string(m.inputs.size()) + " inputs, not 2");
  const auto& ids = m.inputs[0].tensor;
  const auto& pos = m.inputs[1].tensor;
  if (ids.dtype != "int64" || ids.shape.size() != 2 || !ids.shape[0].symbol.empty())
    bad("input '" + m.inputs[0].name + "'", "is " + ids.dtype + " of rank " + std::to_string(ids.shape.size()) +
                                                ", not token ids int64 [B, T] with a static B");
  if (pos.dtype != "int64" || pos.shape.size() != 1) bad("input '" + m.inputs[1].name + "'", "is not cache positions int64 [T]");
  d.rows = ids.shape[0].size;
  d.chunked = !ids.shape[1].symbol.empty();
  if (!d.chunked && ids.shape[1].size != 1)
    bad("input '" + m.inputs[0].name + "'", "takes " + std::to_string(ids.shape[1].size) +
                                                " tokens per call; a static program must take 1 (or export T symbolic)");
  if (m.outputs.empty() || !m.outputs[0].source) bad("manifest outputs", "the program has no logits output");
  const auto& logits = m.outputs[0].tensor;
  if ((logits.dtype != "float32" && logits.dtype != "bfloat16" && logits.dtype != "float16") || logits.shape.size() != 3 ||
      !logits.shape[2].symbol.empty())
    bad("output '" + m.outputs[0].name + "'", "is not logits [B, T, vocab] of a floating dtype");
  d.vocab = logits.shape[2].size;
  d.logitsStage = m.outputs[0].source->stage;
  d.logitsOutput = m.outputs[0].source->output;
  bool state = false;
  for (const auto& st : m.stages) {
    state |= !st.state.empty();
    // The KV caches' layout [B, heads, cache, head dim] gives the cache length.
    for (const auto& s : st.state)
      if (s.tensor.shape.size() == 4 && s.batchDim == 0 && s.tensor.shape[2].symbol.empty())
        d.cacheLength = std::max(d.cacheLength, s.tensor.shape[2].size);
  }
  if (!state) bad("manifest stages", "no stage holds state (a KV cache)");
  if (d.chunked) {
    d.chunk = d.cacheLength > 0 ? d.cacheLength : 1;
    for (const auto& r : m.symbols)
      if (r.symbol == ids.shape[1].symbol && r.max) d.chunk = std::min<int64_t>(d.chunk, *r.max);
  }
  return d;
}


std::vector<at::Tensor> decodeStepInputs(const Manifest& m, const std::string& dir, uint64_t seed) {
  DecodeProgram d = readDecodeProgram(m, dir, "--decode-step");
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return {at::randint(0, d.vocab, {d.rows, 1}, gen, at::TensorOptions().dtype(at::kLong)), at::zeros({1}, at::kLong)};
}

}  // namespace pipecut::runtime
