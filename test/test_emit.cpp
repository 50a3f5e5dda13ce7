// The TorchScript emitter's refusals name the node and what it cannot express.
#include <catch2/catch.hpp>

#include <fstream>

#include <caffe2/serialize/inline_container.h>

#include "emit/torchscript.h"
#include "pt2/package.h"
#include "pt2/program_json.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;
using ir::Json;

namespace {

std::string emitError(const Json& program) {
  pt2::Package pkg;
  pkg.program = pt2::parseProgram(program);
  std::string bytes;
  try {
    emit::writeTorchScript(pkg, "stage_000", [&](const void* d, size_t n) {
      bytes.append(static_cast<const char*>(d), n);
      return n;
    });
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK(bytes.empty());  // refused before anything is written
    return e.what();
  }
  CHECK(bytes.rfind("PK", 0) == 0);  // a zip archive
  return "";
}

}  // namespace

TEST_CASE("the emitter writes a plain program and refuses what TorchScript cannot express", "[emit]") {
  CHECK(emitError(test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"x"}, "out")}))).empty());

  CHECK_THAT(emitError(test::programJson(Json::array({test::tensorNode("torch.ops.aten.no_such_op.default", {"x"}, "out")}))),
             Catch::Contains("node 'out' (aten.no_such_op.default)") &&
                 Catch::Contains("operator aten::no_such_op has no TorchScript kernel"));

  Json extra = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"x"}, "out")}));
  extra["graph_module"]["graph"]["nodes"][0]["inputs"][0]["name"] = "bogus";
  CHECK_THAT(emitError(extra), Catch::Contains("argument 'self' of aten::relu is missing"));

  Json body = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"bx"}, "by")}), {"bx"},
                                "by")["graph_module"]["graph"];
  Json cond{{"target", "torch.ops.higher_order.cond"},
            {"inputs", Json::array({Json{{"name", ""}, {"arg", {{"as_tensor", {{"name", "x"}}}}}, {"kind", 1}},
                                    Json{{"name", ""}, {"arg", {{"as_graph", {{"name", "true_graph_0"}, {"graph", body}}}}}, {"kind", 1}},
                                    Json{{"name", ""}, {"arg", {{"as_graph", {{"name", "false_graph_0"}, {"graph", body}}}}}, {"kind", 1}},
                                    Json{{"name", ""}, {"arg", {{"as_tensors", Json::array({Json{{"name", "x"}}})}}}, {"kind", 1}}})},
            {"outputs", Json::array({Json{{"as_tensor", {{"name", "out"}}}}})},
            {"metadata", Json::object()}, {"is_hop_single_tensor_return", nullptr}, {"name", "out"}};
  // cond becomes prim::If (run against PyTorch on the control_flow fixture).
  CHECK(emitError(test::programJson(Json::array({cond}))).empty());

  // Branches that disagree in what they return cannot make one prim::If.
  Json twoOut = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"bx"}, "by")}), {"bx"},
                                  "by")["graph_module"]["graph"];
  twoOut["outputs"].push_back(Json{{"as_tensor", {{"name", "bx"}}}});
  Json uneven = cond;
  uneven["inputs"][2]["arg"]["as_graph"]["graph"] = twoOut;
  CHECK_THAT(emitError(test::programJson(Json::array({uneven}))),
             Catch::Contains("node 'out' (higher_order.cond)") && Catch::Contains("the branches return 1 and 2 values"));

  Json scan = cond;
  scan["target"] = "torch.ops.higher_order.scan";
  CHECK_THAT(emitError(test::programJson(Json::array({scan}))),
             Catch::Contains("node 'out' (higher_order.scan)") &&
                 Catch::Contains("higher-order op 'scan' is not supported by the TorchScript emitter"));
}

TEST_CASE("a ModuleList entry is bound under its list's name, not the printer's temporaries' _N", "[emit]") {
  // The printer names a getattr after its field ("_0" for "0") and its
  // temporaries "_0", "_1", ...: the collision made every temporary's name
  // search walk the taken names, quadratic in the layer count.
  pt2::Package pkg = pt2::readPackage(test::fixture("llama_tiny"));
  const std::string path = test::outPath("emit/module_list_names.pt");
  {
    std::ofstream out(path, std::ios::binary);
    emit::writeTorchScript(pkg, "stage_000", [&](const void* d, size_t n) {
      out.write(static_cast<const char*>(d), static_cast<std::streamsize>(n));
      return n;
    });
  }
  // The code records are deflated: read them with torch's own reader.
  caffe2::serialize::PyTorchStreamReader zip(path);
  std::string code;
  for (const std::string& r : zip.getAllRecords())
    if (r.size() > 3 && r.compare(r.size() - 3, 3, ".py") == 0) {
      auto [data, size] = zip.getRecord(r);
      code.append(static_cast<const char*>(data.get()), size);
    }
  CHECK_THAT(code, Catch::Contains("layers_0 = getattr(layers, \"0\")"));
  CHECK_THAT(code, Catch::Contains("layers_1 = getattr(layers, \"1\")"));
  CHECK(code.find(" _0 = getattr(") == std::string::npos);
}
