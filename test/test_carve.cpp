// Carving's refusals, on small hand-built programs (no fixture produces them).
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

TEST_CASE("a symbolic value may not cross a stage boundary", "[carve]") {
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
  Json j = test::programJson(Json::array({size, view}));
  CHECK_THAT(carveError(j, {0, 1}), Catch::Contains("symbolic value 'sz' (SymInt) would cross a stage boundary"));
  CHECK(carveError(j, {0, 0}).empty());
}
