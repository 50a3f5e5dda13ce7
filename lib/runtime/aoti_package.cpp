#include "runtime/aoti_package.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>

#include <nlohmann/json.hpp>

#include "emit/stored_tensors.h"
#include "pt2/package.h"
#include "pt2/zip_archive.h"
#include "support/error.h"
#include "support/private_dir.h"

namespace pipecut::runtime {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What the package holds for its model: the one library, when the library
// is all it needs (its weights inside), and the metadata.
struct PackageContents {
  std::string library;  // record name; empty: not loadable here (LibTorch's loader)
  std::unordered_map<std::string, std::string> metadata;
};

PackageContents inspect(const pt2::ArchiveReader& archive, const std::string& deviceKey) {
  const std::string modelDir = "data/aotinductor/model/";
  PackageContents c;
  std::vector<std::string> libraries;
  bool elsewhere = false;  // data the library would have to find at run time
  std::string wrapperMetadata;
  std::vector<std::string> jsonNames;
  auto merge = [&](const std::string& record) {
    nlohmann::json j = nlohmann::json::parse(archive.text(record), nullptr, false);
    if (j.is_object())
      for (const auto& [k, v] : j.items())
        if (v.is_string()) c.metadata[k] = v.get<std::string>();
  };
  for (const std::string& name : archive.records()) {
    if (name.rfind(modelDir, 0) != 0) {
      elsewhere |= name.rfind("data/", 0) == 0;
      continue;
    }
    if (endsWith(name, ".so")) libraries.push_back(name);
    else if (endsWith(name, "_metadata.json")) {
      // Every metadata file of the model; the wrapper's, which LibTorch's
      // loader reads, wins a disagreement (merged last, below).
      if (name.find(".wrapper_") != std::string::npos) wrapperMetadata = name;
      else merge(name);
    } else if (endsWith(name, ".json")) {
      // Read beside the library when it loads: the extern kernels' nodes
      // (the library's name with .json, for ops run by the proxy executor)
      // and torchbind objects. Build flags and kernel notes are not read.
      jsonNames.push_back(name);
    } else if (!endsWith(name, ".cpp") && !endsWith(name, ".h")) {
      elsewhere = true;  // kernel binaries, weight files, objects to link
    }
  }
  if (libraries.size() == 1) {
    const std::string stem = libraries[0].substr(0, libraries[0].size() - 3);
    for (const std::string& name : jsonNames)
      elsewhere |= name == stem + ".json" || endsWith(name, "/custom_objs_config.json");
  }
  if (!wrapperMetadata.empty()) merge(wrapperMetadata);
  if (libraries.size() == 1 && !elsewhere && c.metadata.count("AOTI_DEVICE_KEY") &&
      c.metadata["AOTI_DEVICE_KEY"] == deviceKey)
    c.library = libraries[0];
  return c;
}

// A private directory for the library, and its removal on every path out.
class PrivateCopy {
 public:
  explicit PrivateCopy(const std::string& packagePath)
      : package_(packagePath), dir_("pipecut-aoti", "the package's library", packagePath) {}

  // Writes the record to the directory; its path. The kernel copies the
  // bytes file to file (copy_file_range: no page of either file mapped
  // here, and a clone where the filesystem shares blocks); a filesystem
  // pair it cannot copy between gets a write from the package's mapping.
  const std::string& write(const pt2::ArchiveReader& archive, const std::string& record) {
    file_ = dir_.file("stage.so");
    const pt2::ByteView bytes = archive.bytes(record);
    const std::optional<uint64_t> offset = archive.fileOffset(record);
    int out = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (out < 0) fail("create", errno);
    size_t done = 0;
    if (offset) {
      int in = ::open(archive.path().c_str(), O_RDONLY | O_CLOEXEC);
      loff_t from = in >= 0 ? static_cast<loff_t>(*offset) : 0;
      while (in >= 0 && done < bytes.size) {
        ssize_t n = ::copy_file_range(in, &from, out, nullptr, bytes.size - done, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EXDEV, ENOSYS, EINVAL...: the plain write below goes on from here
        done += static_cast<size_t>(n);
      }
      if (in >= 0) ::close(in);
    }
    while (done < bytes.size) {
      ssize_t n = ::write(out, bytes.data + done, bytes.size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int err = n < 0 ? errno : EIO;
        ::close(out);
        fail("write " + std::to_string(bytes.size) + " bytes to", err);
      }
      done += static_cast<size_t>(n);
    }
    if (::close(out) != 0) fail("write " + std::to_string(bytes.size) + " bytes to", errno);
    return file_;
  }

  const std::string& directory() const { return dir_.path(); }

  // Unlinks the copy and its directory; a loaded library stays mapped.
  void remove() { dir_.remove(); }

 private:
  [[noreturn]] void fail(const std::string& doing, int err) {
    const std::string file = file_;
    remove();
    throw Error(osErrorKind(err), package_, "",
                "cannot " + doing + " " + file + " (the package's library, loaded from there): " + std::strerror(err) +
                    " (set TMPDIR to a directory with room)");
  }
  std::string package_;
  support::PrivateDir dir_;
  std::string file_;
};

}  // namespace

std::unique_ptr<AotiPackage> AotiPackage::load(const std::string& path, c10::Device device, const std::string& weights,
                                               const std::map<std::string, pt2::StoredTensor>& bound) {
  std::unique_ptr<AotiPackage> p(new AotiPackage());
  // The runner for the device's type, as LibTorch's loader finds it: "cuda"
  // is there when LibTorch was built with CUDA (libtorch_cuda registers it).
  const std::string deviceKey = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  auto& runners = torch::inductor::getAOTIModelRunnerRegistry();
  auto creator = runners.find(deviceKey);
  if (creator != runners.end()) {
    std::shared_ptr<pt2::ArchiveReader> archive = pt2::ArchiveReader::open(path);
    PackageContents contents = inspect(*archive, deviceKey);
    if (!contents.library.empty()) {
      PrivateCopy copy(path);
      const std::string& library = copy.write(*archive, contents.library);
      archive.reset();  // the package's mapping: not needed while the library loads
      // The kernel-binary directory is the copy's: a package loaded here has
      // its kernels inside the library (pipecut compile --device cuda embeds
      // them), so nothing is read from it.
      p->runner_ = creator->second(library, 1, device.str(), copy.directory(), false);
      copy.remove();
      p->metadata_ = std::move(contents.metadata);
      p->takeWeights(path, weights, device, bound);
      return p;
    }
  }
  p->loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
      path, "model", false, 1, device.is_cuda() ? device.index() : static_cast<c10::DeviceIndex>(-1));
  p->metadata_ = p->loader_->get_metadata();
  p->takeWeights(path, weights, device, bound);
  return p;
}

void AotiPackage::takeWeights(const std::string& path, const std::string& weights, c10::Device device,
                              const std::map<std::string, pt2::StoredTensor>& bound) {
  auto from = metadata_.find("pipecut.weights");
  if (from == metadata_.end() || from->second != "stage") return;  // the package holds them
  if (weights.empty())
    throw Error(ErrorKind::InvalidInput, path, "",
                "holds no weights, and its manifest record names no .pt2 to take them from; compile it again");
  const pt2::Package source = pt2::readPackage(weights);
  auto prefixIt = metadata_.find("pipecut.weights_prefix");
  const std::string prefix = prefixIt == metadata_.end() ? "" : prefixIt->second;
  // Constant name -> FQN: the runner's own names; the loader takes FQNs.
  std::unordered_map<std::string, std::string> fqns;
  std::unordered_map<std::string, int32_t> dtypes;
  if (runner_) {
    fqns = runner_->getConstantNamesToOriginalFQNs();
    dtypes = runner_->getConstantNamesToDtypes();
  } else {
    for (const std::string& fqn : loader_->get_constant_fqns()) fqns.emplace(fqn, fqn);
  }
  // Constants runtime constant folding computes from the others when the
  // package first runs (pipecut compile's transposed linear weights): the
  // package's own, in no .pt2.
  auto folded = metadata_.find("pipecut.folded_constants");
  const bool foldedAtRun = folded != metadata_.end() && folded->second == "runtime";
  auto isFolded = [](const std::string& s) { return s.rfind("_FOLDED_CONST_", 0) == 0; };
  emit::StoredTensors stored;
  for (const auto& [name, fqn] : fqns) {
    if (foldedAtRun && (isFolded(name) || isFolded(fqn))) continue;
    const std::string key = fqn.rfind(prefix, 0) == 0 ? fqn.substr(prefix.size()) : fqn;
    const std::string where = "constant '" + key + "'";
    auto b = bound.find(key);
    const pt2::StoredTensor* t = b != bound.end() ? &b->second : source.find(key);
    if (!t)
      throw Error(ErrorKind::InvalidInput, path, where,
                  "is not in " + weights + ", the stage's .pt2 the package takes its weights from; compile it again");
    at::Tensor value;
    try {
      value = stored.load(*t);
    } catch (const Error& e) {
      e.rethrowWithFile(weights);
    }
    auto dtype = dtypes.find(name);
    if (dtype != dtypes.end() && dtype->second != static_cast<int32_t>(value.scalar_type()))
      throw Error(ErrorKind::InvalidInput, path, where,
                  std::string("is ") + c10::toString(value.scalar_type()) + " in " + weights +
                      ", not the dtype the package was compiled for; compile it again");
    // The kernels read a constant as it lies (a record starts 64-byte
    // aligned; a view inside one may not, and gets its own copy), on the
    // package's device.
    if (!device.is_cpu()) value = value.to(device);
    else if (reinterpret_cast<uintptr_t>(value.data_ptr()) % 64 != 0) value = value.clone();
    constants_.emplace(name, std::move(value));
  }
  if (runner_) runner_->update_constant_buffer(constants_, false, true, true);
  else loader_->load_constants(constants_, false, true, true);
}

AotiPackage::~AotiPackage() = default;

std::vector<at::Tensor> AotiPackage::run(std::vector<at::Tensor>&& inputs) {
  return runner_ ? runner_->boxed_run(std::move(inputs)) : loader_->boxed_run(std::move(inputs));
}

}  // namespace pipecut::runtime
