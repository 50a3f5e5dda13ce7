// Carving on small hand-built programs: its refusals, and what no fixture isolates.
#include <catch2/catch.hpp>

#include "partition/carve.h"
#include "pt2/program_json.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;
using ir::Json;

namespace {

std::string carveError(const Json& program, std::vector<int> stageOf) {
  pt2::Package pkg;
  pkg.program = pt2::parseProgram(program);
  partition::Assignment a;
  a.numStages = 2;
  a.stageOf = std::move(stageOf);
  partition::CarveOptions o;
  o.recompute = false;
  try {
    partition::carve(pkg, a, o);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

Json withBuffer(Json j) {
  Json& g = j["graph_module"]["graph"];
  g["inputs"].insert(g["inputs"].begin(), Json{{"as_tensor", {{"name", "b_buf"}}}});
  g["tensor_values"]["b_buf"] = g["tensor_values"]["x"];
  auto& specs = j["graph_module"]["signature"]["input_specs"];
  specs.insert(specs.begin(), Json{{"buffer", {{"arg", {{"name", "b_buf"}}}, {"buffer_name", "buf"}, {"persistent", true}}}});
  return j;
}

}  // namespace

TEST_CASE("a buffer updated in one stage but read in another is refused", "[carve]") {
  Json j = withBuffer(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.mul.Tensor", {"x", "b_buf"}, "a"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"a", "a"}, "new_buf"),
      test::tensorNode("torch.ops.aten.relu.default", {"a"}, "out"),
  })));
  auto& outs = j["graph_module"]["signature"]["output_specs"];
  outs.insert(outs.begin(), Json{{"buffer_mutation", {{"arg", {{"name", "new_buf"}}}, {"buffer_name", "buf"}}}});
  auto& gouts = j["graph_module"]["graph"]["outputs"];
  gouts.insert(gouts.begin(), Json{{"as_tensor", {{"name", "new_buf"}}}});
  REQUIRE(carveError(j, {0, 0, 0}).empty());  // all in one stage: fine
  CHECK_THAT(carveError(j, {0, 1, 1}),
             Catch::Contains("buffer 'buf'") && Catch::Contains("updated in stage 1 but read in stage 0"));
}

TEST_CASE("training outputs cannot be pipelined", "[carve]") {
  Json j = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"x"}, "a"),
                                          test::tensorNode("torch.ops.aten.neg.default", {"a"}, "out")}));
  auto& outs = j["graph_module"]["signature"]["output_specs"];
  outs[0] = Json{{"loss_output", {{"arg", {{"name", "out"}}}}}};
  CHECK_THAT(carveError(j, {0, 1}), Catch::Contains("outputs of kind 'loss_output'") &&
                                        Catch::Contains("cannot be pipelined"));
}

TEST_CASE("a symbolic value crossing a boundary travels as a 0-d tensor when no input has it as a size", "[carve]") {
  Json size{{"target", "torch.ops.aten.sym_size.int"},
            {"inputs", Json::array({Json{{"name", "self"}, {"arg", {{"as_tensor", {{"name", "x"}}}}}, {"kind", 1}},
                                    Json{{"name", "dim"}, {"arg", {{"as_int", 0}}}, {"kind", 1}}})},
            {"outputs", Json::array({Json{{"as_sym_int", {{"as_name", "sz"}}}}})},
            {"metadata", Json::object()}, {"is_hop_single_tensor_return", nullptr}, {"name", "sz"}};
  Json view{{"target", "torch.ops.aten.view.default"},
            {"inputs", Json::array({Json{{"name", "self"}, {"arg", {{"as_tensor", {{"name", "x"}}}}}, {"kind", 1}},
                                    Json{{"name", "size"}, {"arg", {{"as_sym_ints", Json::array({Json{{"as_name", "sz"}}})}}},
                                         {"kind", 1}}})},
            {"outputs", Json::array({Json{{"as_tensor", {{"name", "out"}}}}})},
            {"metadata", Json::object()}, {"is_hop_single_tensor_return", nullptr}, {"name", "out"}};
  pt2::Package pkg;
  pkg.program = pt2::parseProgram(test::programJson(Json::array({size, view})));
  partition::Assignment a;
  a.numStages = 2;
  a.stageOf = {0, 1};
  partition::CarveOptions o;
  o.recompute = false;
  partition::Carving c = partition::carve(pkg, a, o);
  // `sz` has no symbol to read back from a shape: stage 0 sends it as int64 [].
  const Stage& producer = c.manifest.stages.at(0);
  const Stage& consumer = c.manifest.stages.at(1);
  REQUIRE(producer.outputs.size() == 1);
  CHECK(producer.outputs[0].name == "sz_carrier");
  CHECK(producer.outputs[0].tensor.dtype == "int64");
  CHECK(producer.outputs[0].tensor.shape.empty());
  REQUIRE(producer.outputs[0].consumers.size() == 1);
  CHECK(producer.outputs[0].consumers[0].stage == 1);
  bool received = false;
  for (const auto& in : consumer.inputs)
    received |= in.name == "sz_carrier" && in.source.kind == ValueSource::Kind::StageOutput && in.source.stage == 0;
  CHECK(received);
  // Stage 0 ends making the carrier; stage 1 starts turning it back into the
  // SymInt its view reads, under the original name.
  const auto& nodes0 = c.stages.at(0).package.program.graph.nodes;
  const auto& nodes1 = c.stages.at(1).package.program.graph.nodes;
  REQUIRE(!nodes0.empty());
  REQUIRE(!nodes1.empty());
  CHECK(nodes0.back()->target == "torch.ops.aten.scalar_tensor.default");
  CHECK(nodes1.front()->target == "torch.ops.aten.item.default");
  CHECK(nodes1.front()->outputs.at(0).value()->name == "sz");
  CHECK(carveError(test::programJson(Json::array({size, view})), {0, 0}).empty());
}
