#pragma once
// `pipecut compile` as a library call: every .pt2 stage of a split compiled
// by AOTInductor into a package that pipecut-run --stage-format aoti runs
// through LibTorch, with no Python: its kernels, and on CUDA its weights (a
// CPU package takes the stage .pt2's: runtime/aoti_package.h).
//
// Compiling is the one step that needs Python with torch: the user's, found
// from `python`, then $PIPECUT_PYTHON, then the setup venv
// ($PIPECUT_VENV, else ~/.cache/pipecut/venv-torch-<LibTorch's version>),
// and refused (InvalidInput) when its torch is not the LibTorch this binary
// links: a package runs only under the torch that compiled it.
//
// One package per stage (not one package of every stage): stages compile in
// parallel, one changed stage recompiles alone, and a rank reads only its
// own stage's bytes (tied weights are already one copy per stage in the split).
//
// Content-addressed: a package's key is the SHA-256 of what determines it
// (the stage .pt2's SHA-256, the device, the torch version, the options, this
// compile script). A stage whose recorded package has the same key and
// still matches its digest is kept; else the cache (`cacheDir`, one
// `<key>.pt2` per package) provides it; else it is compiled and put in the
// cache. So a CI job that splits afresh every time compiles once.
//
// The split directory is replaced in one step (support/staging.h): readers
// see the old directory or the new one, never a package without its manifest
// entry. Unchanged files are hard links into the new directory, not copies.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipecut::driver {

struct CompileRequest {
  std::string dir;               // a split directory with .pt2 stages
  std::string device = "cpu";    // "cpu" or "cuda"
  unsigned jobs = 0;             // packages compiled at once; 0: as cores and memory allow
  std::string python;            // --python; "" to search (above)
  std::string cacheDir;          // "" for the default (defaultCompileCache); see useCache
  bool useCache = true;
  bool progress = false;         // a progress line on stderr
  bool verbose = false;          // the compiler's own output on stderr
  // Inductor configuration (a JSON object) over pipecut's defaults
  // ({"cpp.dynamic_threads": true, "aot_inductor.package_constants_in_so":
  // false} on the CPU, and "pipecut.transpose_weights": true where the
  // linears are MKL's and nothing freezes; "freezing" keeps the weights in);
  // part of the key and the record.
  std::string inductorConfig;
  // CPU packages: "onednn" has the compile script turn float32 linear
  // layers into oneDNN's linear before Inductor sees them, the kernels
  // pipecut-run gives TorchScript stages (runtime/cpu_matmul.h); "blas"
  // leaves ATen's linear, which Inductor calls as mm/addmm; "auto" (the
  // default, for "") is the one of the two the compiling machine's CPU runs
  // faster. Recorded, settled, in the options as "pipecut.cpu_matmul" (the
  // script takes "pipecut." keys for itself). A CUDA compile refuses it
  // (Usage).
  std::string cpuMatmul;
  // --train: per stage, the training programs (F, then I and W, or one B)
  // that pipecut-run --train --stage-format aoti runs, instead of the
  // inference package (compileTraining). `recompute`: "none" (save every
  // value the backward reads), "all" (save only the stage's inputs) or a
  // regular expression naming the modules whose activations the backward
  // recomputes.
  bool train = false;
  std::string recompute = "none";
};

struct CompiledStage {
  uint32_t stage = 0;
  std::string path;              // the package, relative to the directory (--train: F's)
  std::vector<std::string> programs;  // --train: the program files, F first
  std::string how;               // "compiled", "kept" (already in the directory) or "cached"
  double compileSeconds = 0;     // compiled: this run's; cached: when it was compiled; kept: 0
  uint64_t bytes = 0;            // --train: of every program
  std::string key;
};

struct CompileResult {
  std::vector<CompiledStage> stages;
  std::string python;            // the interpreter used ("" when nothing needed compiling)
  std::string torchVersion;      // its torch.__version__
  std::string manifestSha256;    // of the new manifest.pb
  double seconds = 0;            // wall time of the whole command
};

// Throws pipecut::Error: InvalidInput (exit 2) naming the directory, the
// stage or the interpreter for a directory that is not a split, a stage
// without a .pt2, no usable Python, a torch of another version, or a stage
// AOTInductor cannot compile (its error); Environment (exit 6) for a cuda
// compile where that Python sees no GPU, and for what the OS refuses.
CompileResult compileDirectory(const CompileRequest& request);

// compileDirectory for request.train (compileDirectory calls it): the same
// refusals, cache and one-step replacement; each stage's training packages
// are recorded as files of format "aoti-train" (CompiledPackage.program),
// beside any inference package. Usage (exit 2) for --cpu-matmul or an empty
// --recompute.
CompileResult compileTraining(const CompileRequest& request);

// How many stages compile at once when -j is not given: as many as `cores`,
// the stages to compile and `memAvailable` bytes allow, at least one. A
// compile's peak resident memory, measured (2026-11-29, torch 2.11, a
// 7B-shaped stage of 0.67 GB of weights and a 36 MB one): ~0.85 GB of
// Python and Inductor, plus the stage's weights once when the package
// leaves them in the .pt2 (1.49 GB at 0.67 GB), or about three times when it
// carries them (2.67 GB): counted as 1 GB plus 1.25x or 3x the largest
// stage's parameter bytes. (A weightless compile that meets constants of
// Inductor's own compiles again with the weights inside: rare, not counted.)
// memAvailable 0: unknown, cores and stages decide.
unsigned defaultCompileJobs(const std::vector<uint64_t>& parameterBytes, bool weightsInside, uint64_t memAvailable,
                            unsigned cores);

// $PIPECUT_CACHE_DIR/compiled, else $XDG_CACHE_HOME/pipecut/compiled, else
// ~/.cache/pipecut/compiled.
std::string defaultCompileCache();

}  // namespace pipecut::driver
