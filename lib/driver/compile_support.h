#pragma once
// What `pipecut compile` (driver/compile.cpp) and `pipecut compile --train`
// (driver/compile_train.cpp) share: the user's Python and the scripts run
// in it, the content-addressed cache, the .pt2 a stage is compiled from.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/compile.h"
#include "manifest/manifest.h"
#include "support/staging.h"
#include "support/subprocess.h"

namespace pipecut::driver::compiling {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string env(const char* name);

// The interpreter and where it came from, for messages.
struct Python {
  std::string path, from;
  std::string torchVersion;
  bool cuda = false;
};

// --python, $PIPECUT_PYTHON, else the setup venv (driver/compile.h).
Python findPython(const CompileRequest& r);
// Asks `py` for its torch (the compile script's probe) and refuses one that
// is not LibTorch's version, or sees no GPU for a cuda compile.
void probe(Python& py, const std::string& device);
// A compile script's run: its process, and its answer, the last line of its
// output (JSON; "error: ..." when it failed), parsed: null when not JSON.
struct ScriptRun {
  support::ProcessResult process;
  std::string last;
  Json answer;
  // Why it gave no answer: its "error: " line, else the signal that killed
  // it, else "the compiler exited N " followed by `missing`.
  std::string failure(const std::string& missing) const;
};
// Runs `script` (a Python file's text, on stdin) with the request as argv[1].
ScriptRun runScript(const Python& py, const char* script, const Json& request,
                    const std::vector<std::pair<std::string, std::string>>& environment = {});

// An example input of the stage's per input: {dtype, shape, dims}, each
// symbolic size at one value inside its exported range.
Json exampleInputs(const Manifest& m, const Stage& st);
// The stage's .pt2; InvalidInput naming the stage when it has none.
const StageFile& pt2Of(const std::string& dir, const Stage& st);

// A directory of this process's, removed with everything in it.
struct ScratchDir {
  fs::path path;
  ScratchDir() = default;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();
};
// The .pt2 Inductor is given for a stage: its own, or a copy in `scratch`
// with its maps rewritten (AOTInductor cannot compile `map`).
fs::path compileSource(const fs::path& stagePt2, ScratchDir& scratch);

// Links `from` at `to` (same file system), else copies it.
void linkOrCopy(const fs::path& from, const fs::path& to);
// Whether `path` is a regular file of `bytes` bytes with that XXH3-128.
bool fileMatches(const fs::path& path, uint64_t bytes, const std::string& xxh3);

// The cache: <key>.pt2 and <key>.json ({bytes, xxh3_128, torch_version,
// compile_seconds}); an entry is used only when the package matches its
// record. Training programs are entries of their own, one per program.
struct Cache {
  fs::path dir;
  bool enabled = false;
  std::optional<Json> find(const std::string& key) const;
  // Best effort: a full or read-only cache costs the next run a compile, not this one its result.
  void put(const std::string& key, const fs::path& package, const Json& rec) const;
};

// The package cache --cache / --no-cache name (defaultCompileCache);
// refused (InvalidInput) inside the split directory `r.dir`, which compile
// rewrites.
Cache openCache(const CompileRequest& r);

// The split directory as compile's destination, rewritten in one step from
// its manifest: refused (InvalidInput) before any compiling when it holds
// files the manifest does not list, which the rewrite would drop.
support::Destination splitRewrite(const std::string& dir);

// --inductor-config's text as a JSON object; a usage error otherwise.
Json givenInductorConfig(const std::string& text);

// Where Inductor keeps its own cache: $TORCHINDUCTOR_CACHE_DIR, else beside
// the package cache, else `scratch`, made here (removed with it).
std::string inductorCacheDir(const Cache& cache, ScratchDir& scratch);

// Compiles at once as cores and memory allow (defaultCompileJobs).
unsigned defaultJobs(const std::vector<uint64_t>& parameterBytes, bool weightsInside);
// Whether an Inductor setting is on: the JSON boolean true (a 1 is not).
bool settingOn(const Json& config, const char* key);
std::string minutes(double s);

}  // namespace pipecut::driver::compiling
