// runtime/inputs.h's decode-step inputs, which `pipecut-run --profile
// --decode-step` times a KV-cache program with.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include <ATen/ATen.h>

#include "manifest/manifest.h"
#include "runtime/generate/decode_program.h"
#include "runtime/inputs.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;

TEST_CASE("decode-step inputs: [B, 1] token ids from the vocabulary by seed, cache position 0", "[generation]") {
  const std::string spec = test::outPath("inputs/whole.json");
  std::ofstream(spec) << R"({"split_points": {}})";
  const std::string dir = test::outPath("inputs/llama_kv_chunk.whole");
  auto r = test::runPipecut("split " + test::sourcePath("testdata/generate/llama_kv_chunk.pt2") + " --spec " + spec + " -o " +
                            dir + " --force -q");
  INFO(r.output);
  REQUIRE(r.exitCode == 0);
  Manifest m = readManifest(dir);

  auto in = runtime::decodeStepInputs(m, dir, 5);
  REQUIRE(in.size() == 2);
  CHECK(in[0].scalar_type() == at::kLong);
  CHECK(in[0].sizes() == at::IntArrayRef({2, 1}));  // the exported batch, one token: not the chunk it was exported at
  CHECK(in[0].min().item<int64_t>() >= 0);
  CHECK(in[0].max().item<int64_t>() < 256);
  CHECK(in[1].scalar_type() == at::kLong);
  CHECK(in[1].sizes() == at::IntArrayRef({1}));
  CHECK(in[1].item<int64_t>() == 0);
  // The exported shapes take them.
  CHECK(runtime::splitMicrobatches(in, m, 1).at(0).size() == 2);
  // The seed picks the tokens: the same seed the same ones. Over 64 seeds the
  // draws cover more than one token (a constant would pass the range check).
  CHECK(at::equal(runtime::decodeStepInputs(m, dir, 5)[0], in[0]));
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 64; ++seed) seen.insert(runtime::decodeStepInputs(m, dir, seed)[0][0][0].item<int64_t>());
  CHECK(seen.size() > 16);

  // A program without state is no decode step: refused naming the directory.
  m.stages[0].state.clear();
  try {
    runtime::decodeStepInputs(m, dir, 5);
    FAIL("accepted a program without state");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK_THAT(std::string(e.what()), Catch::StartsWith(dir + ": manifest stages: no stage holds state (a KV cache); "
                                                             "--decode-step takes a decode step"));
  }
}
