#pragma once
// A whole file mapped private (copy-on-write), for the large inputs pipecut
// reads in place (checkpoints' tensors): the file is never written; a page
// something writes through a tensor over it becomes this process's own.
// Only a regular file is opened: a FIFO, a device, a socket or a directory
// is refused without blocking on it, which opening a FIFO for reading would
// do until a writer came.
#include <cstdint>
#include <memory>
#include <string>

namespace pipecut::support {

class MappedFile {
 public:
  // Throws pipecut::Error naming `path`: InvalidInput for a path that leads
  // nowhere or to anything but a regular file ("is a FIFO, expected <what>"),
  // Environment for what the OS refuses (permission, no memory to map).
  // An empty file maps to no bytes.
  static std::shared_ptr<const MappedFile> open(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// "" for a regular file (after symbolic links), else what it is: "a FIFO",
// "a directory", "a character device", ...; the OS's text when it cannot
// say. Never opens the file, so never blocks.
std::string notARegularFile(const std::string& path);

// Throws pipecut::Error (InvalidInput) naming `path` unless it is a regular
// file: "is a FIFO, expected <what>".
void requireRegularFile(const std::string& path, const std::string& what);

}  // namespace pipecut::support
