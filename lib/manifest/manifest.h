#pragma once
// The stage manifest: which value flows where. These are plain C++ types so
// that torch-facing code (emit, runtime) can use them without seeing protobuf;
// manifest_io.cpp converts to and from the protobuf schema in proto/manifest.proto
// (JSON through protobuf's JSON mapping, and binary).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipecut {

constexpr uint32_t kManifestFormatVersion = 1;

struct DimSpec {
  int64_t size = 0;      // when symbol is empty
  std::string symbol;    // e.g. "s77" for a dynamic dimension
};

struct TensorSpec {
  std::string dtype;     // torch name: "float32", "int64", ...
  std::vector<DimSpec> shape;
};

// Where a stage input comes from.
struct ValueSource {
  enum class Kind { UserInput, StageOutput } kind = Kind::UserInput;
  uint32_t userInput = 0;    // index into Manifest::inputs
  uint32_t stage = 0;        // producing stage
  uint32_t output = 0;       // index into that stage's outputs
};

// Where a stage output goes.
struct Consumer {
  enum class Kind { StageInput, UserOutput } kind = Kind::StageInput;
  uint32_t stage = 0;        // consuming stage
  uint32_t input = 0;        // index into that stage's inputs
  uint32_t userOutput = 0;   // index into Manifest::outputs
};

struct StageInput {
  std::string name;          // the value's name in the source graph
  TensorSpec tensor;
  ValueSource source;
};

struct StageOutput {
  std::string name;
  TensorSpec tensor;
  std::vector<Consumer> consumers;
};

// An AOTInductor package's origin (proto CompiledPackage; driver/compile.h).
struct CompiledPackage {
  std::string device;        // "cpu" or "cuda"
  std::string torchVersion;  // of the compiling torch, e.g. "2.11.0+cpu"
  std::string source;        // the stage's .pt2 it was compiled from
  std::string sourceXxh3_128;
  std::string options;       // Inductor configuration, canonical JSON
  std::string key;           // content address, 64 lowercase hex digits
  // support::zipDirectorySha256 of `source` when compiled; empty in older
  // manifests. pipecut-run loads a package that takes its weights from the
  // .pt2 only beside a file with this identity, --no-verify or not.
  std::string sourceDirectorySha256;
  // Format "aoti-train" (pipecut compile --train): "F", "I", "W" or "B"
  // (proto CompiledPackage.program), and the recompute policy; both empty
  // for an inference package.
  std::string program;
  std::string recompute;
};

// Whether Inductor `options` (CompiledPackage::options) leave the weights out
// of the package: not in its library ("aot_inductor.package_constants_in_so"
// false) nor in files of its own ("package_constants_on_disk_format" absent, null or "").
// Such a package takes them from its stage's .pt2 (runtime/aoti_package.h),
// unless its compile found constants no .pt2 holds and kept them inside
// (the package's metadata says which). Text that is not a JSON object: false.
bool weightsLeftOut(const std::string& options);

struct StageFile {
  std::string path;          // relative to the manifest's directory
  std::string format;        // "torchscript", "pt2", "aoti" or "aoti-train" (a training program)
  std::string sha256;        // lowercase hex; empty unless split --sha256 (then both are set)
  uint64_t bytes = 0;
  // A .pt2 written by `split --inline-grad-regions`, for NativeRT: its
  // no_grad and autocast-disabling regions inlined, its maps of static
  // length unrolled; forward only.
  bool gradRegionsInlined = false;
  // 32 lowercase hex digits; empty in a manifest written before pipecut
  // recorded it (those have sha256 only). What pipecut verify and
  // pipecut-run check by default: support/digest.h says why both are there.
  std::string xxh3_128;
  std::optional<CompiledPackage> compiled;  // formats "aoti" and "aoti-train" only
};

// A format a stage lacks because that format cannot express it; the split
// wrote the others (see the split driver).
struct MissingFile {
  std::string format;        // "torchscript" or "pt2"
  std::string reason;        // the emitter's message, naming the node
};

struct StageParameter {
  std::string name;          // original FQN
  std::string kind;          // "parameter", "buffer", "non_persistent_buffer", "constant"
  uint64_t bytes = 0;
};

// A tensor the stage updates in place from call to call (proto StageState).
struct StageState {
  std::string name;          // the lifted tensor's FQN
  TensorSpec tensor;
  int32_t batchDim = -1;     // the dimension along the batch; -1: none
  std::string initial = "zeros";  // "zeros", or "stored" (the stage files hold it)
};

// A tensor a stage needs whose bytes its files do not hold (proto
// ExternalTensor): pipecut-run binds it from --weights.
struct ExternalTensor {
  std::string name;                   // FQN in the stage's program
  TensorSpec tensor;                  // dtype and static shape
  std::vector<std::string> aliases;   // other FQNs of the same tensor it may bind from
  std::string kind;                   // as StageParameter::kind
  std::string xxh3_128;               // the bytes' digest when pinned, else empty
};

// A checkpoint file a split read weights from (proto WeightSourceFile).
struct WeightSourceFile {
  std::string file;                   // file name, no directory
  uint64_t bytes = 0;                 // its size
  uint32_t tensors = 0;               // tensors read from it
  std::string xxh3_128;               // over the tensors read (proto says how)
};

struct Stage {
  uint32_t index = 0;
  std::vector<StageFile> files;
  std::vector<StageInput> inputs;     // forward() argument order
  std::vector<StageOutput> outputs;   // forward() returns a tuple in this order
  std::vector<StageParameter> parameters;
  uint64_t parameterBytes = 0;
  uint32_t nodeCount = 0;
  uint64_t boundaryBytesPerSample = 0;  // bytes this stage sends to other stages, per batch element
  std::vector<std::string> modules;     // top-level modules whose nodes it runs
  std::vector<std::string> recomputed;  // values recomputed here instead of received
  std::vector<MissingFile> missing;     // formats asked for that could not express this stage
  // What it updates in place, call to call: TorchScript stages take these as
  // trailing forward() arguments, after `inputs`.
  std::vector<StageState> state;
  std::vector<ExternalTensor> external;  // bound at run time; sorted by name
  // Split with --support: whether the target takes every node here, and if
  // not, the first node it refuses and why. nullopt without --support.
  std::optional<bool> supported;
  std::string unsupportedReason;
};

struct UserValue {
  std::string name;          // placeholder / output name in the source graph
  TensorSpec tensor;
  std::optional<ValueSource> source;  // outputs only: the stage output that carries it
};

struct TiedGroup {
  std::vector<std::string> names;     // FQNs that share one tensor
  std::vector<uint32_t> stages;       // stages holding a copy
};

// The sizes a symbolic dimension may take (proto SymbolRange).
struct SymbolRange {
  std::string symbol;
  int64_t min = 0;
  std::optional<int64_t> max;         // nullopt: unbounded
};

struct Manifest {
  uint32_t formatVersion = kManifestFormatVersion;
  std::string sourceModel;            // file name as given
  // The source's identity. Always: the SHA-256 of its zip central directory
  // (every record's name, size and CRC-32; support/zip_directory.h), cheap.
  // The whole file's SHA-256 (as sha256sum prints it) only when asked for
  // (split --hash-source), else empty: it reads every weight.
  std::string sourceDirectorySha256;
  std::string sourceSha256;
  std::string torchVersion;
  std::string schemaVersion;          // "8.17"
  std::string pipecutVersion;
  std::string splitSpec;              // the spec as given (canonical JSON)
  std::vector<UserValue> inputs;      // flat user inputs, calling-convention order
  std::vector<UserValue> outputs;     // flat user outputs
  std::string inSpec, outSpec;        // pytree specs of the source program, verbatim
  std::vector<Stage> stages;
  std::vector<TiedGroup> tiedGroups;
  std::vector<SymbolRange> symbols;   // sorted by symbol
  bool metaExport = false;            // the source was exported on the meta device
  std::vector<WeightSourceFile> weightSources;  // checkpoint files read at split time
  std::string supportTarget;          // split --support: the target ("" none)
  uint32_t minSupportedNodes = 0;     // and its --min-supported-nodes
  // Whether any stage holds external tensors: the split runs only with --weights.
  bool weightless() const {
    for (const auto& s : stages)
      if (!s.external.empty()) return true;
    return false;
  }
};

// I/O. Errors throw pipecut::Error naming the file and field.
std::string manifestToJson(const Manifest& m);       // protobuf JSON mapping, deterministic
std::string manifestToBinary(const Manifest& m);     // protobuf wire format, deterministic
Manifest manifestFromJson(const std::string& text, const std::string& file);
Manifest manifestFromBinary(const std::string& bytes, const std::string& file);
// Reads OUTDIR/manifest.pb (or manifest.json when the binary one is absent).
Manifest readManifest(const std::string& dir);


}  // namespace pipecut
