#include "driver/compile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "driver/aoti_compile_script.h"
#include "driver/support_targets.h"
#include "emit/libtorch_version.h"
#include "ir/clone.h"
#include "manifest/directory.h"
#include "manifest/manifest.h"
#include "passes/pass_manager.h"
#include "passes/unroll_map.h"
#include "pt2/package.h"
#include "runtime/cpu_matmul.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/files.h"
#include "support/host_cpu.h"
#include "support/parallel.h"
#include "support/progress.h"
#include "support/sha256.h"
#include "support/staging.h"
#include "support/subprocess.h"
#include "support/zip_directory.h"

namespace pipecut::driver {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// The interpreter and where it came from, for messages.
struct Python {
  std::string path, from;
  std::string torchVersion;
  bool cuda = false;
};

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

// The script's last line: its answer (JSON), or "error: ...".
std::string lastLine(const std::string& out) {
  size_t end = out.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  size_t start = out.find_last_of('\n', end);
  return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

support::ProcessResult runScript(const Python& py, const Json& request, const std::vector<std::pair<std::string, std::string>>& environment = {}) {
  support::ProcessRequest p;
  p.argv = {py.path, "-", request.dump()};
  p.input = kAotiCompileScript;
  p.environment = environment;
  p.environment.emplace_back("PYTHONUNBUFFERED", "1");
  try {
    return support::runProcess(p);
  } catch (const Error& e) {
    throw Error(ErrorKind::InvalidInput, py.path, py.from, e.message());
  }
}

void probe(Python& py, const std::string& device) {
  support::ProcessResult res = runScript(py, {{"mode", "probe"}});
  const std::string last = lastLine(res.output);
  Json answer;
  try {
    answer = Json::parse(last);
  } catch (const Json::exception&) {
  }
  if (res.exitCode != 0 || !answer.is_object() || !answer.contains("torch") || !answer["torch"].is_string())
    throw Error(ErrorKind::InvalidInput, py.path, py.from,
                "is not a Python with torch (" + (last.rfind("error: ", 0) == 0 ? last.substr(7) : "exit " + std::to_string(res.exitCode)) +
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

// The exported ranges of the symbols the stage's inputs use: a stage with
// state is exported again (scripts/aoti_compile.py), with these.
Json symbolRanges(const Manifest& m, const Stage& st) {
  Json out = Json::object();
  for (const StageInput& in : st.inputs)
    for (const DimSpec& d : in.tensor.shape)
      for (const SymbolRange& r : m.symbols)
        if (!d.symbol.empty() && r.symbol == d.symbol) out[d.symbol] = {r.min, r.max ? Json(*r.max) : Json()};
  return out;
}

Json stateOf(const Stage& st) {
  Json out = Json::array();
  for (const StageState& s : st.state) out.push_back({{"name", s.name}, {"initial", s.initial}});
  return out;
}

const StageFile& pt2Of(const std::string& dir, const Stage& st) {
  for (const StageFile& f : st.files)
    if (f.format == "pt2") return f;
  std::string why = "has no .pt2 file to compile; split with --format pt2 (or both)";
  for (const MissingFile& mf : st.missing)
    if (mf.format == "pt2") why = "has no .pt2 file, the format cannot express it (" + mf.reason + ")";
  throw Error(ErrorKind::InvalidInput, dir, "stage " + std::to_string(st.index), why);
}

// "stage_000.pt2" -> "stage_000.aoti-cpu.pt2".
std::string packageName(const std::string& pt2, const std::string& device) {
  std::string stem = pt2.size() > 4 && pt2.ends_with(".pt2") ? pt2.substr(0, pt2.size() - 4) : pt2;
  return stem + ".aoti-" + device + ".pt2";
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

// The cache: <key>.pt2 and <key>.json ({bytes, xxh3_128, torch_version,
// compile_seconds}); an entry is used only when the package matches its record.
struct Cache {
  fs::path dir;
  bool enabled = false;

  std::optional<Json> find(const std::string& key) const {
    if (!enabled) return std::nullopt;
    try {
      Json rec = Json::parse(support::readFile((dir / (key + ".json")).string()));
      if (fileMatches(dir / (key + ".pt2"), rec.at("bytes").get<uint64_t>(), rec.at("xxh3_128").get<std::string>()))
        return rec;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }

  // Best effort: a full or read-only cache costs the next run a compile, not this one its result.
  void put(const std::string& key, const fs::path& package, const Json& rec) const {
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
};

// What one stage needs.
struct StagePlan {
  const Stage* stage = nullptr;
  const StageFile* source = nullptr;
  const StageFile* previous = nullptr;  // the package for this device the manifest lists, if any
  std::string key, name;
  // Skip: a stage the split's --support target (aoti, aoti-cuda) marked
  // unsupported; it runs in another format (pipecut-run --stage-format auto).
  enum class From { Keep, Cache, Compile, Skip } from = From::Compile;
  Json cached;  // From::Cache: the cache's record
};

unsigned defaultJobs(const std::vector<const StagePlan*>& compiles, bool weightsInside) {
  std::vector<uint64_t> bytes;
  for (const StagePlan* p : compiles) bytes.push_back(p->stage->parameterBytes);
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

const ir::Node* findMap(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (n->target == passes::kMapTarget) return n.get();
    for (const auto& in : n->inputs)
      if (const ir::Graph* body = in.arg.body())
        if (const ir::Node* m = findMap(*body)) return m;
  }
  return nullptr;
}

// A directory of this process's, removed with everything in it.
struct ScratchDir {
  fs::path path;
  ScratchDir() = default;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

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

// The tensors a weightless stage's .pt2 holds no bytes of (the compile
// script compiles around stand-ins and keeps them out of the package).
Json externalOf(const Stage& st) {
  Json out = Json::array();
  for (const ExternalTensor& e : st.external) out.push_back(e.name);
  return out;
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

}  // namespace

unsigned defaultCompileJobs(const std::vector<uint64_t>& parameterBytes, bool weightsInside, uint64_t memAvailable,
                            unsigned cores) {
  uint64_t perJob = 1ull << 30;
  for (uint64_t w : parameterBytes) perJob = std::max<uint64_t>(perJob, (weightsInside ? 3 * w : w + w / 4) + (1ull << 30));
  const uint64_t byMemory = memAvailable ? std::max<uint64_t>(1, memAvailable / perJob) : UINT64_MAX;
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min<uint64_t>({std::max(1u, cores), byMemory, parameterBytes.size()})));
}

std::string defaultCompileCache() {
  if (std::string d = env("PIPECUT_CACHE_DIR"); !d.empty()) return d + "/compiled";
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/pipecut/compiled";
  return env("HOME") + "/.cache/pipecut/compiled";
}

CompileResult compileDirectory(const CompileRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  if (r.device != "cpu" && r.device != "cuda")
    throw Error(ErrorKind::Usage, "", "--device", "'" + r.device + "': expected cpu or cuda");
  const SplitDirectory split = openSplitDirectory(r.dir);
  const Manifest& m = split.manifest;
  // Everything the new directory will hold comes from the manifest: a
  // directory with other files in it is refused before any compiling.
  support::Destination dst;
  dst.path = r.dir;
  dst.kind = support::StagedKind::Directory;
  dst.what = "split directory";
  dst.previousOutput = [](const fs::path& p) { return splitDirectoryInTheWay(p.string()); };
  dst.inputs = {r.dir};
  if (std::string inTheWay = splitDirectoryInTheWay(r.dir); !inTheWay.empty())
    throw Error(ErrorKind::InvalidInput, r.dir, "",
                inTheWay + "; pipecut compile rewrites the directory from its manifest and would drop what it does not list");
  support::checkDestination(dst);

  Cache cache;
  cache.enabled = r.useCache;
  cache.dir = fs::absolute(r.cacheDir.empty() ? defaultCompileCache() : r.cacheDir);
  if (cache.enabled) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(cache.dir, ec), d = fs::weakly_canonical(r.dir, ec);
    if (std::mismatch(d.begin(), d.end(), c.begin(), c.end()).first == d.end())
      throw Error(ErrorKind::InvalidInput, cache.dir.string(), "--cache", "is inside the split directory " + r.dir);
  }

  // CPU kernels take their OpenMP thread count when they run, not the
  // compiling machine's core count: pipecut-run's thread policy decides
  // (stages side by side in one process each get their share).
  // A CUDA package's Triton kernels go inside its library, not beside it:
  // pipecut-run then loads it like a CPU package (runtime/aoti_package.h),
  // its one file written under TMPDIR and unlinked once loaded, where
  // LibTorch's loader extracts the package into /tmp and a killed run
  // leaves it there.
  // A CPU package's weights stay in the stage's .pt2 beside it, which
  // pipecut-run maps and hands to the kernels (runtime/aoti_package.h): a
  // package of kernels only is not a second copy of the stage on disk, nor
  // a write of the stage's size at every load. (CUDA packages keep theirs
  // until that path has run on a GPU.)
  Json config = r.device == "cpu"
                    ? Json{{"cpp.dynamic_threads", true}, {"aot_inductor.package_constants_in_so", false}}
                    : Json{{"aot_inductor.embed_kernel_binary", true}};
  if (!r.inductorConfig.empty()) {
    Json given;
    try {
      given = Json::parse(r.inductorConfig);
    } catch (const Json::exception& e) {
      throw Error(ErrorKind::Usage, "", "--inductor-config", std::string("is not JSON: ") + e.what());
    }
    if (!given.is_object()) throw Error(ErrorKind::Usage, "", "--inductor-config", "expected a JSON object of Inductor settings");
    for (auto& [k, v] : given.items()) config[k] = v;
    // Freezing (weights prepacked for the kernels) and runtime constant
    // folding (`_FOLDED_CONST_*`, computed from the weights at first run)
    // make constants of their own, which no .pt2 holds: such a package
    // keeps its weights, compiled so at once (the compile script would
    // find them afterwards and compile the stage a second time).
    if ((settingOn(given, "freezing") || settingOn(given, "aot_inductor.use_runtime_constant_folding")) &&
        !given.contains("aot_inductor.package_constants_in_so"))
      config.erase("aot_inductor.package_constants_in_so");
  }
  if (!r.cpuMatmul.empty() && r.device != "cpu")
    throw Error(ErrorKind::Usage, "", "--cpu-matmul", "chooses the kernels of CPU packages (--device cpu)");
  const auto matmul = runtime::parseCpuMatmul(r.cpuMatmul.empty() ? "auto" : r.cpuMatmul);
  if (!matmul)
    throw Error(ErrorKind::Usage, "", "--cpu-matmul", "expected auto, onednn or blas, got '" + r.cpuMatmul + "'");
  // Auto is settled here, by the compiling machine's CPU (the package's
  // kernels are compiled for its instruction sets too), and recorded as
  // settled: the key and the record say which kernels a package holds.
  if (r.device == "cpu") {
    const runtime::CpuMatmul settled = runtime::resolveCpuMatmul(*matmul, support::hostCpuVendor());
    config["pipecut.cpu_matmul"] = runtime::cpuMatmulName(settled);
    // MKL's route: each linear multiplies by its weight transposed once, at
    // the package's first run (scripts/aoti_compile.py,
    // transpose_linear_weights, says why), unless the user said otherwise
    // or freezing packs the weights its own way.
    if (settled == runtime::CpuMatmul::Blas && !settingOn(config, "freezing") && !config.contains("pipecut.transpose_weights"))
      config["pipecut.transpose_weights"] = true;
  }
  // A weightless split's stages hold no weights to compile in: their
  // packages take them at load (pipecut-run --weights binds them), on every
  // device, and nothing may fold them at compile time.
  if (m.weightless()) {
    if (settingOn(config, "freezing") || (config.contains("aot_inductor.package_constants_in_so") &&
                                          config["aot_inductor.package_constants_in_so"] != false))
      throw Error(ErrorKind::Usage, "", "--inductor-config",
                  r.dir + " is a weightless split (its stages hold no weights): its packages take their weights at "
                  "load, so neither freezing nor aot_inductor.package_constants_in_so can be on; split with --weights "
                  "to compile the weights in");
    config["aot_inductor.package_constants_in_so"] = false;
  }
  const std::string options = config.dump();  // keys sorted: one text per configuration
  const bool weightless = weightsLeftOut(options);
  const std::string scriptSha256 = sha256Bytes(kAotiCompileScript, sizeof(kAotiCompileScript) - 1);
  Python py;
  bool probed = false;
  auto ensurePython = [&] {
    if (probed) return;
    py = findPython(r);
    probe(py, r.device);
    probed = true;
  };

  std::vector<StagePlan> plans(m.stages.size());
  std::vector<std::string> sourceSha(m.stages.size()), sourceDirectory(m.stages.size());
  for (const Stage& st : m.stages) {
    plans[st.index].stage = &st;
    plans[st.index].source = &pt2Of(r.dir, st);
    plans[st.index].name = packageName(plans[st.index].source->path, r.device);
    for (const StageFile& f : st.files)
      if (f.format == "aoti" && f.compiled->device == r.device) plans[st.index].previous = &f;
    if (compilesSupportedStages(m.supportTarget) && st.supported == false) plans[st.index].from = StagePlan::From::Skip;
  }
  support::parallelFor(plans.size(), 0, [&](size_t s) {
    const StageFile& f = *plans[s].source;
    const std::string path = (fs::path(r.dir) / f.path).string();
    sourceSha[s] = !f.sha256.empty() ? f.sha256 : digestFile(Digest::Sha256, path);
    sourceDirectory[s] = support::zipDirectorySha256(path);
  });
  auto keyOf = [&](size_t s, const std::string& torchVersion) {
    const std::string k = Json{{"source_sha256", sourceSha[s]}, {"device", r.device}, {"torch", torchVersion},
                               {"options", options}, {"script_sha256", scriptSha256}}.dump();
    return sha256Bytes(k.data(), k.size());
  };
  // A package already in the directory is kept when its key, taken with the
  // torch that compiled it, is unchanged (a torch of LibTorch's version) and
  // its bytes still match: an unchanged directory needs no Python at all.
  bool allKept = true;
  for (StagePlan& p : plans) {
    if (p.from == StagePlan::From::Skip) continue;
    const StageFile* prev = p.previous;
    if (prev && emit::publicVersion(prev->compiled->torchVersion) == emit::libtorchVersion() &&
        prev->path == p.name && prev->compiled->key == keyOf(p.stage->index, prev->compiled->torchVersion) &&
        fileMatches(fs::path(r.dir) / prev->path, prev->bytes, prev->xxh3_128)) {
      p.from = StagePlan::From::Keep;
      p.key = prev->compiled->key;
    }
    allKept = allKept && p.from == StagePlan::From::Keep;
  }
  if (!allKept) ensurePython();
  for (StagePlan& p : plans) {
    if (p.from == StagePlan::From::Keep || p.from == StagePlan::From::Skip) continue;
    p.key = keyOf(p.stage->index, py.torchVersion);
    if (auto rec = cache.find(p.key)) {
      p.from = StagePlan::From::Cache;
      p.cached = *rec;
    }
  }
  std::vector<const StagePlan*> compiles;
  for (const StagePlan& p : plans)
    if (p.from == StagePlan::From::Compile) compiles.push_back(&p);

  CompileResult result;
  result.python = py.path;
  result.torchVersion = py.torchVersion;
  result.stages.resize(plans.size());
  Manifest out = m;
  std::atomic<size_t> done{0};
  std::mutex runningMutex;
  std::vector<uint32_t> running;
  support::ProgressLine line(r.progress && !compiles.empty(), [&](double elapsed) {
    std::lock_guard<std::mutex> lock(runningMutex);
    std::string now;
    for (uint32_t s : running) now += (now.empty() ? "" : ", ") + std::to_string(s);
    return "pipecut: compiled " + std::to_string(done.load()) + " of " + std::to_string(compiles.size()) +
           " stages for " + r.device + (now.empty() ? "" : " (now: stage " + now + ")") + ", " + minutes(elapsed);
  });
  support::writeStaged(dst, [&](const fs::path& tmp) {
    // Every listed file but the packages being replaced, as hard links.
    for (const Stage& st : m.stages)
      for (const StageFile& f : st.files)
        if (!(f.format == "aoti" && f.compiled->device == r.device)) linkOrCopy(fs::path(r.dir) / f.path, tmp / f.path);
    for (const StagePlan& p : plans)
      if (p.from == StagePlan::From::Keep) linkOrCopy(fs::path(r.dir) / p.name, tmp / p.name);
      else if (p.from == StagePlan::From::Cache) linkOrCopy(cache.dir / (p.key + ".pt2"), tmp / p.name);

    // Inductor's own cache beside ours (or, without ours, in a directory of
    // this run's): nothing lands in /tmp/torchinductor_$USER.
    std::string inductorCache = env("TORCHINDUCTOR_CACHE_DIR");
    std::optional<fs::path> scratch;
    if (inductorCache.empty()) {
      if (cache.enabled) {
        inductorCache = (cache.dir / "inductor").string();
      } else {
        std::string tmpl = (fs::temp_directory_path() / "pipecut-compile-XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) throwOsError(tmpl, "create a scratch directory", errno);
        scratch = tmpl;
        inductorCache = tmpl;
      }
    }
    std::vector<double> seconds(plans.size(), 0);
    const unsigned jobs = r.jobs ? r.jobs : defaultJobs(compiles, !weightless);
    std::mutex logMutex;
    try {
      support::parallelFor(compiles.size(), jobs, [&](size_t i) {
        const StagePlan& p = *compiles[i];
        const uint32_t s = p.stage->index;
        {
          std::lock_guard<std::mutex> lock(runningMutex);
          running.push_back(s);
        }
        ScratchDir sourceCopy;
        const fs::path source = compileSource(fs::absolute(fs::path(r.dir) / p.source->path), sourceCopy);
        Json req = {{"mode", "compile"},
                    {"source", source.string()},
                    {"output", fs::absolute(tmp / p.name).string()},
                    {"device", r.device},
                    {"options", Json::parse(options)},
                    {"inputs", exampleInputs(m, *p.stage)},
                    {"symbols", symbolRanges(m, *p.stage)},
                    {"state", stateOf(*p.stage)},
                    {"external", externalOf(*p.stage)}};
        support::ProcessResult res = runScript(py, req, {{"TORCHINDUCTOR_CACHE_DIR", inductorCache}});
        {
          std::lock_guard<std::mutex> lock(runningMutex);
          running.erase(std::find(running.begin(), running.end(), s));
        }
        if (r.verbose) {
          std::lock_guard<std::mutex> lock(logMutex);
          std::cerr << "pipecut: stage " << s << " compiler output:\n" << res.output << std::flush;
        }
        const std::string last = lastLine(res.output);
        Json answer;
        try {
          answer = Json::parse(last);
        } catch (const Json::exception&) {
        }
        std::error_code ec;
        if (res.exitCode != 0 || !answer.is_object() || !fs::is_regular_file(tmp / p.name, ec)) {
          std::string why = last.rfind("error: ", 0) == 0 ? last.substr(7)
                            : res.signal           ? "the compiler was killed by signal " + std::to_string(res.signal)
                                                   : "the compiler exited " + std::to_string(res.exitCode) + " without a package";
          throw Error(ErrorKind::InvalidInput, (fs::path(r.dir) / p.source->path).string(), "stage " + std::to_string(s),
                      "AOTInductor cannot compile it for " + r.device + ": " + why + (r.verbose ? "" : " (--verbose shows the compiler's output)"));
        }
        seconds[s] = answer.value("seconds", 0.0);
        ++done;
      });
    } catch (...) {
      std::error_code ec;
      if (scratch) fs::remove_all(*scratch, ec);
      throw;
    }
    if (scratch) {
      std::error_code ec;
      fs::remove_all(*scratch, ec);
    }

    // The manifest: each stage's package for this device replaced by the new one.
    bool sha256 = true;  // packages get a SHA-256 when every other file has one (split --sha256)
    for (const Stage& st : m.stages)
      for (const StageFile& f : st.files) sha256 = sha256 && !f.sha256.empty();
    support::parallelFor(plans.size(), 0, [&](size_t s) {
      const StagePlan& p = plans[s];
      CompiledStage& c = result.stages[s];
      c.stage = static_cast<uint32_t>(s);
      if (p.from == StagePlan::From::Skip) {
        c.how = "skipped";
        return;
      }
      Stage& st = out.stages[s];
      std::erase_if(st.files, [&](const StageFile& f) { return f.format == "aoti" && f.compiled->device == r.device; });
      StageFile f;
      f.path = p.name;
      f.format = "aoti";
      const fs::path path = tmp / p.name;
      f.bytes = fs::file_size(path);
      f.xxh3_128 = p.from == StagePlan::From::Keep ? p.previous->xxh3_128 : digestFile(Digest::Xxh3_128, path.string());
      if (sha256) f.sha256 = digestFile(Digest::Sha256, path.string());
      f.compiled = p.from == StagePlan::From::Keep
                       ? *p.previous->compiled
                       : CompiledPackage{r.device, py.torchVersion, p.source->path, p.source->xxh3_128, options, p.key};
      // Kept or not, the package is this .pt2's (its key holds the file's SHA-256).
      f.compiled->sourceDirectorySha256 = sourceDirectory[s];
      st.files.push_back(f);
      c.path = p.name;
      c.bytes = f.bytes;
      c.key = p.key;
      c.how = p.from == StagePlan::From::Keep ? "kept" : p.from == StagePlan::From::Cache ? "cached" : "compiled";
      c.compileSeconds = p.from == StagePlan::From::Cache ? p.cached.value("compile_seconds", 0.0) : seconds[s];
      if (p.from == StagePlan::From::Compile)
        cache.put(p.key, path, {{"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}, {"torch_version", py.torchVersion},
                                {"device", r.device}, {"compile_seconds", seconds[s]}});
    });
    result.manifestSha256 = writeManifests(tmp.string(), out);
  });
  line.stop();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pipecut::driver
