// manifest (manifest.pb / manifest.json) -> manifestFromBinary / manifestFromJson.
// A manifest that reads must write, read back, and write the same bytes, in
// both encodings, and the two encodings must agree.
#include "manifest/manifest.h"
#include "targets.h"

#ifdef PIPECUT_FUZZ_STANDALONE
// protobuf logs every invalid UTF-8 string it meets while parsing: thousands of
// lines a second under the fuzzer. (Only in the standalone build, which links
// the system protobuf alone; the project's build also links LibTorch's copy.)
#include <google/protobuf/stubs/logging.h>
namespace {
const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();
}  // namespace
#endif

namespace pipecut::fuzz {

int manifest(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool binary = data[0] == 'b';
  const std::string body(asText(data + 1, size - 1));
  Manifest m;
  if (!refusesOrRuns(binary ? "manifestFromBinary" : "manifestFromJson", [&] {
        m = binary ? manifestFromBinary(body, "manifest.pb") : manifestFromJson(body, "manifest.json");
      }))
    return 0;

  std::string pb, json;
  mustSucceed("manifestToBinary of a manifest that read", [&] { pb = manifestToBinary(m); });
  mustSucceed("manifestToJson of a manifest that read", [&] { json = manifestToJson(m); });
  mustSucceed("binary round trip", [&] {
    Manifest again = manifestFromBinary(pb, "roundtrip.pb");
    if (manifestToBinary(again) != pb) finding("binary -> read -> binary changed the bytes");
  });
  mustSucceed("JSON round trip", [&] {
    Manifest again = manifestFromJson(json, "roundtrip.json");
    if (manifestToJson(again) != json) finding("JSON -> read -> JSON changed the text");
    if (manifestToBinary(again) != pb) finding("the JSON round trip lost something the binary form keeps");
  });
  return 0;
}

}  // namespace pipecut::fuzz
