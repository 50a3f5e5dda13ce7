// Carving on small hand-built programs: its refusals, and what no fixture isolates.
#include <catch2/catch.hpp>

#include "partition/carve.h"
#include "partition/stage_summary.h"
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

TEST_CASE("containedModules names each stage's largest modules whole in it, by the frames nodes carry",
          "[carve]") {
  auto frame = [](const std::string& path) { return "L__" + path + "," + path + ",M"; };
  auto stack = [&](std::vector<std::string> paths) {
    std::string t = "L__self__,,Root";  // the root frame (path "") is no module
    for (const auto& p : paths) t += ";" + frame(p);
    return t;
  };
  // layers.2.mlp is called from outside layers.2's forward (its stack lacks
  // the layers.2 frame): it is not counted as part of layers.2.
  const std::vector<std::pair<std::vector<std::string>, int>> nodes = {
      {{"layers.0", "layers.0.mlp"}, 0}, {{"layers.0"}, 0},       {{"layers.1", "layers.1.attn"}, 0},
      {{"layers.1", "layers.1.mlp"}, 1}, {{"layers.2"}, 0},       {{"layers.2.mlp"}, 1},
      {{"head"}, 1},                     {{}, 1},
  };
  Json list = Json::array();
  std::vector<int> stageOf;
  std::string prev = "x";
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string out = i + 1 == nodes.size() ? "out" : "a" + std::to_string(i);
    list.push_back(test::tensorNode("torch.ops.aten.relu.default", {prev}, out,
                                    nodes[i].first.empty() ? "" : stack(nodes[i].first)));
    stageOf.push_back(nodes[i].second);
    prev = out;
  }
  ir::Program p = pt2::parseProgram(test::programJson(list));
  partition::Assignment a;
  a.numStages = 2;
  a.stageOf = stageOf;
  auto modules = partition::containedModules(p.graph, a);
  REQUIRE(modules.size() == 2);
  // layers.0.mlp is inside layers.0, whole in the same stage; layers.1 is split.
  CHECK(modules[0] == std::vector<std::string>{"layers.0", "layers.1.attn", "layers.2"});
  CHECK(modules[1] == std::vector<std::string>{"head", "layers.1.mlp", "layers.2.mlp"});
  a.stageOf.assign(stageOf.size(), 1);
  a.stageOf[0] = 0;  // one node of layers.0 (and all of layers.0.mlp) in stage 0
  modules = partition::containedModules(p.graph, a);
  CHECK(modules[0] == std::vector<std::string>{"layers.0.mlp"});
  // Coverage goes by path: layers.2.mlp is under layers.2, whole in stage 1 too.
  CHECK(modules[1] == std::vector<std::string>{"head", "layers.1", "layers.2"});
}

TEST_CASE("tiedGroups lists the storages two or more stages hold, with every name of each", "[carve]") {
  pt2::Package whole;
  auto stored = [](const std::string& record) {
    pt2::StoredTensor t;
    t.data.record = record;
    return t;
  };
  whole.weights["embed.weight"] = stored("data/0");
  whole.weights["lm_head.weight"] = stored("data/0");
  whole.weights["norm.weight"] = stored("data/1");
  whole.constants["table"] = stored("data/2");
  whole.constants["table_alias"] = stored("data/2");
  // A repeat within a stage counts once; a name no table has is no storage.
  std::vector<std::vector<std::string_view>> lifted = {
      {"embed.weight", "norm.weight", "embed.weight", "table"}, {"lm_head.weight"}, {"lm_head.weight", "unknown"}};
  auto groups = partition::tiedGroups(whole, lifted);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].names == std::vector<std::string>{"embed.weight", "lm_head.weight"});
  CHECK(groups[0].stages == std::vector<uint32_t>{0, 1, 2});
  lifted[1].push_back("table_alias");  // the same constant storage, under its other name
  groups = partition::tiedGroups(whole, lifted);
  REQUIRE(groups.size() == 2);
  CHECK(groups[1].names == std::vector<std::string>{"table", "table_alias"});
  CHECK(groups[1].stages == std::vector<uint32_t>{0, 1});
  // One name in two stages is a group of its own; none held twice, none.
  lifted[2].push_back("norm.weight");
  groups = partition::tiedGroups(whole, lifted);
  REQUIRE(groups.size() == 3);
  CHECK(groups[1].names == std::vector<std::string>{"norm.weight"});
  CHECK(groups[1].stages == std::vector<uint32_t>{0, 2});
  CHECK(partition::tiedGroups(whole, {{"embed.weight", "norm.weight"}, {"table"}}).empty());
}
