#include "driver/merge.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "manifest/checkpoint.h"
#include "support/error.h"
#include "support/parallel.h"
#include "support/safetensors.h"
#include "support/sha256.h"
#include "support/staging.h"

namespace pipecut::driver {

namespace {

// A stage file, memory-mapped read-only: its bytes are hashed, parsed and
// written out straight from the page cache, so merging a checkpoint larger
// than memory needs no heap beyond the headers (the kernel pages the files in
// and drops them as the output is written). The files must not be truncated
// while mapped (SIGBUS), as with any mmap reader.
class MappedFile {
 public:
  MappedFile(const std::string& path, const std::string& where) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(where, "cannot open the stage file");
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      fail(where, "cannot read the stage file");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(ErrorKind::InvalidInput, path_, where, "the stage file is not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        errno = err;
        fail(where, "cannot map the stage file");
      }
      data_ = static_cast<const uint8_t*>(m);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(ErrorKind::InvalidInput, path_, where, what + ": " + std::strerror(errno));
  }
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// One model tensor as found in a stage file.
struct Held {
  uint32_t stage = 0;
  const support::SafetensorsEntry* entry = nullptr;
  const uint8_t* data = nullptr;
};

bool sameTensor(const Held& a, const Held& b) {
  const auto& x = *a.entry;
  const auto& y = *b.entry;
  return x.dtype == y.dtype && x.shape == y.shape && x.end - x.begin == y.end - y.begin &&
         (x.end == x.begin || std::memcmp(a.data, b.data, x.end - x.begin) == 0);
}

std::string describe(const support::SafetensorsEntry& e) {
  std::string s = e.dtype + "[";
  for (size_t d = 0; d < e.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(e.shape[d]);
  return s + "]";
}

// Why two copies differ, for the message.
std::string difference(const Held& a, const Held& b) {
  if (a.entry->dtype != b.entry->dtype || a.entry->shape != b.entry->shape)
    return describe(*a.entry) + " against " + describe(*b.entry);
  return "their bytes differ";
}

constexpr std::string_view kOptimizerPrefix = "optimizer/";

support::Destination destination(const MergeRequest& r) {
  support::Destination d;
  d.path = r.output;
  d.what = "merged state dict";
  d.previousOutput = [](const std::filesystem::path& p) { return support::safetensorsInTheWay(p.string(), kMergeFormat); };
  d.inputs = {r.checkpoint};
  d.force = r.force;
  return d;
}

}  // namespace

MergeResult mergeCheckpoint(const MergeRequest& r) {
  support::checkDestination(destination(r));
  Checkpoint c = readCheckpoint(r.checkpoint);
  const std::string base = r.checkpoint.empty() || r.checkpoint.back() == '/' ? r.checkpoint : r.checkpoint + "/";
  const std::string json = base + "checkpoint.json";
  const size_t n = c.stages.size();
  auto at = [](size_t i) { return "stages[" + std::to_string(i) + "]"; };

  // Map every stage file and check its size (cheap) before hashing any.
  std::vector<std::unique_ptr<MappedFile>> files;
  for (size_t i = 0; i < n; ++i) {
    const CheckpointStage& s = c.stages[i];
    std::string path = base + s.file;
    files.push_back(std::make_unique<MappedFile>(path, at(i) + ".file"));
    if (files.back()->size() != s.bytes)
      throw Error(ErrorKind::InvalidInput, path, at(i) + ".bytes",
                  "the file has " + std::to_string(files.back()->size()) + " bytes; checkpoint.json says " +
                      std::to_string(s.bytes));
  }
  support::parallelFor(n, r.threads, [&](size_t i) {
    std::string got = sha256Bytes(files[i]->data(), files[i]->size());
    if (got != c.stages[i].sha256)
      throw Error(ErrorKind::InvalidInput, base + c.stages[i].file, at(i) + ".sha256",
                  "the file hashes to " + got + "; checkpoint.json says " + c.stages[i].sha256 +
                      " (the file changed after the checkpoint was written)");
  });

  // Parse each file; its model tensors must be the ones checkpoint.json lists.
  std::vector<support::SafetensorsFile> parsed(n);
  std::map<std::string, Held> held;  // by FQN: the first stage's copy
  for (size_t i = 0; i < n; ++i) {
    const std::string path = base + c.stages[i].file;
    try {
      parsed[i] = support::parseSafetensors(files[i]->view());
    } catch (const Error& e) {
      e.rethrowWithFile(path);
    }
    std::set<std::string> listed(c.stages[i].tensors.begin(), c.stages[i].tensors.end());
    const uint8_t* data = files[i]->data() + parsed[i].dataOffset;
    for (const support::SafetensorsEntry& e : parsed[i].tensors) {
      if (std::string_view(e.key).substr(0, kOptimizerPrefix.size()) == kOptimizerPrefix) continue;
      if (!listed.erase(e.key))
        throw Error(ErrorKind::InvalidInput, path, e.key,
                    "a model tensor that " + at(i) + ".tensors in " + json + " does not list");
      Held h{static_cast<uint32_t>(i), &e, data + e.begin};
      auto [it, fresh] = held.emplace(e.key, h);
      if (!fresh && !sameTensor(it->second, h))
        throw Error(ErrorKind::InvalidInput, r.checkpoint, "tensor '" + e.key + "'",
                    "tied copies differ between stage " + std::to_string(it->second.stage) + " and stage " +
                        std::to_string(i) + " (" + difference(it->second, h) + ")");
    }
    if (!listed.empty())
      throw Error(ErrorKind::InvalidInput, path, at(i) + ".tensors",
                  "'" + *listed.begin() + "' is listed in " + json + " but the file does not hold it");
  }

  // Tied groups: the names held must agree, and every name gets the tensor.
  std::map<std::string, Held> out = held;
  for (size_t g = 0; g < c.tiedGroups.size(); ++g) {
    const TiedGroup& group = c.tiedGroups[g];
    const std::string where = "tied_groups[" + std::to_string(g) + "]";
    const Held* first = nullptr;
    std::string firstName;
    for (const std::string& name : group.names) {
      auto it = held.find(name);
      if (it == held.end()) continue;
      if (!first) {
        first = &it->second;
        firstName = name;
      } else if (!sameTensor(*first, it->second)) {
        throw Error(ErrorKind::InvalidInput, r.checkpoint, "tensor '" + name + "'",
                    "tied to '" + firstName + "' (" + json + " " + where + ") but stage " +
                        std::to_string(it->second.stage) + "'s copy differs from stage " +
                        std::to_string(first->stage) + "'s (" + difference(*first, it->second) + ")");
      }
    }
    if (!first) throw Error(ErrorKind::InvalidInput, json, where, "no stage file holds any of its names");
    for (const std::string& name : group.names) out.emplace(name, *first);
  }

  std::vector<support::SafetensorsTensorRef> refs;
  refs.reserve(out.size());
  for (const auto& [name, h] : out)
    refs.push_back({name, h.entry->dtype, h.entry->shape, h.data, h.entry->end - h.entry->begin});
  std::map<std::string, std::string> metadata = {
      {"format", kMergeFormat}, {"step", std::to_string(c.step)}, {"source_sha256", c.sourceSha256},
      {"source_directory_sha256", c.sourceDirectorySha256}};

  MergeResult result;
  result.tensors = refs.size();
  result.stages = n;
  result.step = c.step;
  support::writeStaged(destination(r), [&](const std::filesystem::path& temp) {
    result.sha256 = support::writeSafetensors(temp.string(), refs, metadata);
    struct stat st;
    if (::stat(temp.c_str(), &st) == 0) result.bytes = static_cast<uint64_t>(st.st_size);
  });
  return result;
}

}  // namespace pipecut::driver
