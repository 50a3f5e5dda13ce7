// The safetensors parser shared by the runner's input/reference reader and
// the fuzzer: every malformed header is refused naming the key and field.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "support/error.h"
#include "support/safetensors.h"

using pipecut::support::parseSafetensors;

namespace {

std::string file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string safetensorsErrorOf(const std::string& bytes) {
  try {
    parseSafetensors(bytes);
  } catch (const pipecut::Error& e) {
    CHECK(e.kind() == pipecut::ErrorKind::InvalidInput);
    return e.where() + ": " + e.message();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("safetensors: a well-formed file parses with its metadata", "[safetensors]") {
  std::string bytes = file(R"({"__metadata__": {"compute_dtype": "bfloat16"},
                               "input.0": {"dtype": "F32", "shape": [2, 1], "data_offsets": [0, 8]},
                               "output.0": {"dtype": "BOOL", "shape": [0, 5], "data_offsets": [8, 8]}})",
                           std::string(8, '\x01'));
  auto f = parseSafetensors(bytes);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].key == "input.0");
  CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 1});
  CHECK(f.tensors[0].itemSize == 4);
  CHECK(f.tensors[1].begin == 8);
  CHECK(f.metadata.at("compute_dtype") == "bfloat16");
  CHECK(f.dataOffset == bytes.size() - 8);
}

TEST_CASE("safetensors: malformed containers and headers are refused by field", "[safetensors]") {
  std::string ok = R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])";
  CHECK_THAT(safetensorsErrorOf("abc"), Catch::Contains("too short"));
  std::string big = file("{}", "");
  big[5] = '\x01';  // a header length of 2^40
  CHECK_THAT(safetensorsErrorOf(big), Catch::StartsWith("header: header length") && Catch::Contains("exceeds 100 MiB"));
  std::string past = file("{}", "");
  past[0] = 9;
  CHECK_THAT(safetensorsErrorOf(past), Catch::StartsWith("header: header length 9 runs past the end"));
  CHECK(safetensorsErrorOf(file("[1]", "")) == "header: not a JSON object");
  CHECK(safetensorsErrorOf(file(R"({"__metadata__": {"a": 1}})", "")) == "__metadata__.a: expected a string");
  CHECK(safetensorsErrorOf(file(R"({"x": 3})", "")) == "x: expected an object with dtype, shape and data_offsets");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": 3, "shape": [], "data_offsets": [0, 0]}})", "")) == "x.dtype: expected a string");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F8", "shape": [], "data_offsets": [0, 0]}})", "")) ==
        "x.dtype: unsupported dtype 'F8'");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", std::string(8, 0))) ==
        "x.shape[0]: expected a size >= 0");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", std::string(8, 0))) ==
        "x.shape[0]: expected a size >= 0");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", std::string(8, 0))) ==
        "x.data_offsets: expected [begin, end]");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", std::string(8, 0))) ==
        "x.data_offsets: [8, 0] is outside the data section of 8 bytes");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", std::string(8, 0))) ==
        "x.data_offsets: [0, 16] is outside the data section of 8 bytes");
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::string(8, 0))) ==
        "x.data_offsets: spans 8 bytes; dtype and shape need 12");
  // Sizes whose product overflows 64 bits are "more than the file holds", not a wrapped small number.
  CHECK(safetensorsErrorOf(file(R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", "")) ==
        "x.data_offsets: spans 0 bytes; dtype and shape need more than the file holds");
  CHECK(safetensorsErrorOf(file("{\"x\": {" + ok + "}}", std::string(8, 0))) == "accepted");
}
