#pragma once
// Fuzz targets for pipecut's readers: each takes raw bytes and feeds them to
// one reader (and, when it accepts them, to what pipecut runs next), all
// torch-free. Built two ways (test/fuzz/CMakeLists.txt): as libFuzzer
// executables (fuzz_<name>, clang, ASan+UBSan; scripts/fuzz.sh) and into
// pipecut_fuzz_replay (the normal gcc build), which ctest runs over
// testdata/fuzz/<name>/ and seeds taken from the fixtures.
//
// The contract: a pipecut::Error of kind InvalidInput is the expected refusal
// (the target returns 0). Anything else (another exception, an Error of kind
// Internal, a broken invariant checked after a successful read) is a finding:
// the target prints it and calls std::abort(), so libFuzzer records a crash
// and the replay names the file.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "support/error.h"

namespace pipecut::fuzz {

// Input formats (seeds: scripts/fuzz_seeds.py):
//   program_json    the text of models/<name>.json
//   payload_config  8 bytes little-endian record size, then the config JSON;
//                   when bit 63 of that size is set, records whose name ends in
//                   an odd digit are missing (the size is taken without bit 63)
//   split_spec      the spec's text, assigned against a small fixed program
//   manifest        one selector byte ('b': protobuf wire format, anything
//                   else: JSON), then the manifest
//   safetensors     the file's bytes
//   pickle          a pickle (the data.pkl of a torch.save file), walked as
//                   older .pt2 layouts are before LibTorch unpickles them
//   archive         a .pt2 file (a zip): its central directory and records
//   run_options     pipecut-run's arguments, separated by NUL bytes
//   control_messages one selector byte (kind; bit 7: sealed), then a message
//                   as a stranger could leave it in the rendezvous store
int program_json(const uint8_t* data, size_t size);
int payload_config(const uint8_t* data, size_t size);
int split_spec(const uint8_t* data, size_t size);
int manifest(const uint8_t* data, size_t size);
int safetensors(const uint8_t* data, size_t size);
int pickle(const uint8_t* data, size_t size);
int archive(const uint8_t* data, size_t size);
int run_options(const uint8_t* data, size_t size);
int control_messages(const uint8_t* data, size_t size);

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};
inline constexpr Target kTargets[] = {
    {"program_json", program_json}, {"payload_config", payload_config}, {"split_spec", split_spec},
    {"manifest", manifest},         {"safetensors", safetensors},       {"pickle", pickle},
    {"archive", archive},           {"run_options", run_options}, {"control_messages", control_messages},
};

// How the last run ended when it did not end in a finding: the step that
// refused the input and its message (empty step: accepted). For the replay's report.
struct Outcome {
  std::string refusedBy, message;
};
inline Outcome& lastOutcome() {
  static Outcome o;
  return o;
}

// A finding: print it and abort (libFuzzer saves the input as a crash).
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==pipecut-fuzz== FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs `body`; an Error of kind `expected` (InvalidInput for readers of
// files) is the expected refusal (returns false), any other exception is a
// finding. Returns true when `body` completed.
template <class F>
bool refusesOrRuns(const char* step, F&& body, ErrorKind expected = ErrorKind::InvalidInput) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    if (e.kind() == expected) {
      lastOutcome() = {step, e.what()};
      return false;
    }
    finding(std::string(step) + ": pipecut::Error of kind " + std::to_string(e.exitCode()) + ": " + e.what());
  } catch (const std::exception& e) {
    finding(std::string(step) + ": unexpected exception: " + e.what());
  } catch (...) {
    finding(std::string(step) + ": unexpected non-std exception");
  }
}

// Runs `body`, which must succeed: any exception, a refusal included, is a finding.
template <class F>
void mustSucceed(const char* step, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    finding(std::string(step) + " must succeed but threw: " + e.what());
  } catch (...) {
    finding(std::string(step) + " must succeed but threw a non-std exception");
  }
}

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace pipecut::fuzz
