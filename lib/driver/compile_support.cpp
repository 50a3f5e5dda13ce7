// What pipecut compile and pipecut compile --train share: finding and
// asking the user's Python, the compile cache, a stage's compile source.
#include "driver/compile_support.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "driver/aoti_compile_script.h"
#include "emit/libtorch_version.h"
#include "ir/clone.h"
#include "manifest/directory.h"
#include "passes/pass_manager.h"
#include "passes/unroll_map.h"
#include "pt2/package.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/files.h"

namespace pipecut::driver::compiling {

namespace {

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

const ir::Node* findMap(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n->target == passes::kMapTarget) return n.get();
    for (const auto& in : n->inputs)
      if (const ir::Graph* body = in.arg.body())
        if (const ir::Node* m = findMap(*body)) return m;
  }
  return nullptr;
}

}  // namespace

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}


// The interpreter and where it came from, for messages.

Python findPython(const CompileRequest& r) {
  if (!r.python.empty()) return {r.python, "--python"};
  if (std::string p = env("PIPECUT_PYTHON"); !p.empty()) return {p, "$PIPECUT_PYTHON"};
  const std::string venv = !env("PIPECUT_VENV").empty()
                               ? env("PIPECUT_VENV")
                               : env("HOME") + "/.cache/pipecut/venv-torch-" + emit::libtorchVersion();
  if (executable(venv + "/bin/python")) return {venv + "/bin/python", "the setup venv"};
  throw Error(ErrorKind::InvalidInput, "", "--python",
              "compiling needs Python with torch " + emit::libtorchVersion() +
                  " (AOTInductor compiles there): none given (--python, $PIPECUT_PYTHON) and no setup venv at " + venv +
                  " (bash scripts/setup.sh makes one)");
}

namespace {

std::string lastLine(const std::string& out) {
  size_t end = out.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  size_t start = out.find_last_of('\n', end);
  return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

bool isError(const std::string& line) { return line.rfind("error: ", 0) == 0; }

}  // namespace

std::string ScriptRun::failure(const std::string& missing) const {
  if (isError(last)) return last.substr(7);
  if (process.signal) return "the compiler was killed by signal " + std::to_string(process.signal);
  return "the compiler exited " + std::to_string(process.exitCode) + " " + missing;
}

ScriptRun runScript(const Python& py, const char* script, const Json& request,
                    const std::vector<std::pair<std::string, std::string>>& environment) {
  support::ProcessRequest p;
  p.argv = {py.path, "-", request.dump()};
  p.input = script;
  p.environment = environment;
  p.environment.emplace_back("PYTHONUNBUFFERED", "1");
  ScriptRun run;
  try {
    run.process = support::runProcess(p);
  } catch (const Error& e) {
    throw Error(ErrorKind::InvalidInput, py.path, py.from, e.message());
  }
  run.last = lastLine(run.process.output);
  try {
    run.answer = Json::parse(run.last);
  } catch (const Json::exception&) {
  }
  return run;
}

void probe(Python& py, const std::string& device) {
  const ScriptRun run = runScript(py, kAotiCompileScript, {{"mode", "probe"}});
  const Json& answer = run.answer;
  if (run.process.exitCode != 0 || !answer.is_object() || !answer.contains("torch") || !answer["torch"].is_string())
    throw Error(ErrorKind::InvalidInput, py.path, py.from,
                "is not a Python with torch (" + (isError(run.last) ? run.last.substr(7) : "exit " + std::to_string(run.process.exitCode)) +
                    "); pipecut compile needs torch " + emit::libtorchVersion());
  py.torchVersion = answer["torch"].get<std::string>();
  py.cuda = answer.value("cuda", false);
  if (emit::publicVersion(py.torchVersion) != emit::libtorchVersion())
    throw Error(ErrorKind::InvalidInput, py.path, py.from,
                "has torch " + py.torchVersion + ", pipecut links LibTorch " + emit::libtorchVersion() +
                    ": a package runs only under the torch that compiled it; give --python a Python with torch " +
                    emit::libtorchVersion());
  if (device == "cuda" && !py.cuda)
    throw Error(ErrorKind::Environment, py.path, "--device cuda",
                "its torch sees no CUDA device (torch.cuda.is_available() is False); a cuda package is compiled and "
                "tuned on the GPU it will run on");
}

// An example input of the stage's: each symbolic size at one value inside
// its exported range (8 where the range allows: not 0 or 1, which torch
// would specialize on, and small enough to trace quickly).
Json exampleInputs(const Manifest& m, const Stage& st) {
  auto valueOf = [&](const std::string& symbol) {
    for (const SymbolRange& r : m.symbols)
      if (r.symbol == symbol) {
        int64_t v = std::max<int64_t>(r.min, 8);
        return r.max ? std::min(v, *r.max) : v;
      }
    return int64_t{8};
  };
  Json inputs = Json::array();
  for (const StageInput& in : st.inputs) {
    Json shape = Json::array(), dims = Json::array();
    for (const DimSpec& d : in.tensor.shape) {
      shape.push_back(d.symbol.empty() ? d.size : valueOf(d.symbol));
      dims.push_back(d.symbol.empty() ? Json() : Json(d.symbol));
    }
    inputs.push_back({{"dtype", in.tensor.dtype}, {"shape", shape}, {"dims", dims}});
  }
  return inputs;
}

const StageFile& pt2Of(const std::string& dir, const Stage& st) {
  for (const StageFile& f : st.files)
    if (f.format == "pt2") return f;
  std::string why = "has no .pt2 file to compile; split with --format pt2 (or both)";
  for (const MissingFile& mf : st.missing)
    if (mf.format == "pt2") why = "has no .pt2 file, the format cannot express it (" + mf.reason + ")";
  throw Error(ErrorKind::InvalidInput, dir, "stage " + std::to_string(st.index), why);
}

// Links `from` at `to` (same file system), else copies it.
void linkOrCopy(const fs::path& from, const fs::path& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return;
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) throwOsError(to.string(), "copy " + from.string() + " to", ec.value());
}

bool fileMatches(const fs::path& path, uint64_t bytes, const std::string& xxh3) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) != bytes || ec) return false;
  try {
    return digestFile(Digest::Xxh3_128, path.string()) == xxh3;
  } catch (const Error&) {
    return false;
  }
}

unsigned defaultJobs(const std::vector<uint64_t>& bytes, bool weightsInside) {
  uint64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    uint64_t kb = 0;
    meminfo >> kb;
    if (key == "MemAvailable:") available = kb * 1024;
    meminfo.ignore(64, '\n');
  }
  return defaultCompileJobs(bytes, weightsInside, available, std::thread::hardware_concurrency());
}


// A directory of this process's, removed with everything in it.

// The .pt2 Inductor is given for a stage. AOTInductor in torch 2.11 cannot
// compile `map`: Inductor lowers it to a while_loop whose C++ wrapper code
// fails an assertion (codegen_subgraph_prefix: the body's inputs are not the
// loop's), on the unsplit program too, while `cond` and `while_loop` compile.
// So a stage with a map is compiled from a copy of its .pt2 in `scratch`
// where each top-level map of static length (at most kMaxUnroll slices) is
// unrolled by the pass NativeRT's stages get (passes/unroll_map.h), and
// each other one, over a symbolic length say, is written as a while_loop
// (passes/map_as_loop.h). The copy keeps every weight under its FQN, which
// is where pipecut-run takes them from in the stage's own .pt2. Returns the
// stage's own path when it has no map.
fs::path compileSource(const fs::path& stagePt2, ScratchDir& scratch) {
  pt2::Package pkg = pt2::readPackage(stagePt2.string());
  if (!findMap(pkg.program.graph)) return stagePt2;
  ir::Program program = ir::cloneProgram(pkg.program);
  passes::PassManager pm;
  pm.setVerifyEach(true);
  passes::addMapRewrites(pm);
  pm.run(program);
  if (const ir::Node* left = findMap(program.graph))
    throw Error(ErrorKind::InvalidInput, stagePt2.string(), "node '" + left->label() + "'",
                "AOTInductor (torch " + emit::libtorchVersion() +
                    ") cannot compile a map, and pipecut rewrites only a top-level one whose body's results have "
                    "static sizes (unrolled, or as a while_loop)");
  std::string tmpl = (fs::temp_directory_path() / "pipecut-compile-source-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throwOsError(tmpl, "create a scratch directory", errno);
  scratch.path = tmpl;
  const fs::path copy = scratch.path / stagePt2.filename();
  pt2::writePackageFile(pt2::withProgram(pkg, std::move(program)), pt2::packageDestination(copy.string()));
  return copy;
}

// Whether an Inductor setting is on: the JSON boolean true (a 1 is not).
bool settingOn(const Json& config, const char* key) {
  return config.contains(key) && config[key].is_boolean() && config[key].get<bool>();
}

std::string minutes(double s) {
  int t = static_cast<int>(s);
  return t >= 60 ? std::to_string(t / 60) + "m" + (t % 60 < 10 ? "0" : "") + std::to_string(t % 60) + "s"
                 : std::to_string(t) + "s";
}


ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path.empty()) fs::remove_all(path, ec);
}

Cache openCache(const CompileRequest& r) {
  Cache cache;
  cache.enabled = r.useCache;
  cache.dir = fs::absolute(r.cacheDir.empty() ? defaultCompileCache() : r.cacheDir);
  if (cache.enabled) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(cache.dir, ec), d = fs::weakly_canonical(r.dir, ec);
    if (std::mismatch(d.begin(), d.end(), c.begin(), c.end()).first == d.end())
      throw Error(ErrorKind::InvalidInput, cache.dir.string(), "--cache", "is inside the split directory " + r.dir);
  }
  return cache;
}

support::Destination splitRewrite(const std::string& dir) {
  support::Destination dst;
  dst.path = dir;
  dst.kind = support::StagedKind::Directory;
  dst.what = "split directory";
  dst.previousOutput = [](const fs::path& p) { return splitDirectoryInTheWay(p.string()); };
  dst.inputs = {dir};
  if (std::string inTheWay = splitDirectoryInTheWay(dir); !inTheWay.empty())
    throw Error(ErrorKind::InvalidInput, dir, "",
                inTheWay + "; pipecut compile rewrites the directory from its manifest and would drop what it does not list");
  support::checkDestination(dst);
  return dst;
}

Json givenInductorConfig(const std::string& text) {
  Json given;
  try {
    given = Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error(ErrorKind::Usage, "", "--inductor-config", std::string("is not JSON: ") + e.what());
  }
  if (!given.is_object()) throw Error(ErrorKind::Usage, "", "--inductor-config", "expected a JSON object of Inductor settings");
  return given;
}

std::string inductorCacheDir(const Cache& cache, ScratchDir& scratch) {
  std::string dir = env("TORCHINDUCTOR_CACHE_DIR");
  if (!dir.empty()) return dir;
  if (cache.enabled) return (cache.dir / "inductor").string();
  std::string tmpl = (fs::temp_directory_path() / "pipecut-compile-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throwOsError(tmpl, "create a scratch directory", errno);
  scratch.path = tmpl;
  return tmpl;
}

std::optional<Json> Cache::find(const std::string& key) const {
  if (!enabled) return std::nullopt;
  try {
    Json rec = Json::parse(support::readFile((dir / (key + ".json")).string()));
    if (fileMatches(dir / (key + ".pt2"), rec.at("bytes").get<uint64_t>(), rec.at("xxh3_128").get<std::string>()))
      return rec;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

void Cache::put(const std::string& key, const fs::path& package, const Json& rec) const {
  if (!enabled) return;
  const std::string tmp = ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  try {
    fs::create_directories(dir, ec);
    linkOrCopy(package, dir / (key + ".pt2" + tmp));
    fs::rename(dir / (key + ".pt2" + tmp), dir / (key + ".pt2"));
    std::ofstream(dir / (key + ".json" + tmp)) << rec.dump() << "\n";
    fs::rename(dir / (key + ".json" + tmp), dir / (key + ".json"));
  } catch (const std::exception& e) {
    fs::remove(dir / (key + ".pt2" + tmp), ec);
    fs::remove(dir / (key + ".json" + tmp), ec);
    std::cerr << "pipecut: warning: cannot add to the compile cache " << dir.string() << ": " << e.what() << "\n";
  }
}

}  // namespace pipecut::driver::compiling
