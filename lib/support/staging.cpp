#include "support/staging.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/error.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

// Invariants:
// - A temporary `<dst>.tmp.<pid>` is flock'ed (exclusively) by its writer for
//   as long as the writer lives; the kernel drops the lock when the writer
//   dies, however it dies. The pid in the name alone is not enough (pids are
//   reused, and on a network filesystem the writer may be on another machine),
//   and the lock alone is not enough (flock may be unsupported or local-only
//   on network filesystems). So an entry is removed only when both say its
//   writer is gone: wrongly keeping litter is harmless, wrongly removing a live
//   writer's output is not.
// - `<dst>` is only ever replaced by a rename of a complete temporary, so it
//   holds the whole previous output or the whole new one, never a mix.

namespace pipecut::support {

namespace fs = std::filesystem;

namespace {

// The pid of `<base>.tmp.<digits>` (or `.old.`, when `withOld`), else 0.
pid_t stalePid(const std::string& name, const std::string& base, bool withOld) {
  if (name.size() <= base.size() + 5 || name.compare(0, base.size(), base) != 0) return 0;
  std::string tag = name.substr(base.size(), 5), digits = name.substr(base.size() + 5);
  if (tag != ".tmp." && !(withOld && tag == ".old.")) return 0;
  if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  long pid = std::stol(digits);
  return pid > 0 ? static_cast<pid_t>(pid) : 0;  // never kill(0, ...): that is our process group
}

// Removes the leftovers of dead writers of `dst`. Each entry's lock is held
// while it is removed, so two sweepers never remove the same entry at once.
void sweep(const fs::path& dst, bool withOld) {
  fs::path parent = dst.parent_path();
  std::string base = dst.filename().string();
  std::error_code ec;
  std::vector<std::pair<std::string, pid_t>> candidates;
  for (fs::directory_iterator it(parent.empty() ? fs::path(".") : parent, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (pid_t pid = stalePid(name, base, withOld)) candidates.emplace_back(name, pid);
  }
  for (const auto& [name, pid] : candidates) {
    fs::path p = parent / name;
    // O_NOFOLLOW: a symlink with such a name is not something we wrote.
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;  // gone already, or not ours to judge
    bool unlocked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    // An entry named with our own pid cannot be ours (we create ours after
    // this sweep): it was left by an earlier process with the same pid.
    bool gone = pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH);
    if (unlocked && gone) {
      fs::remove_all(p, ec);
      if (ec)
        std::cerr << "pipecut: warning: cannot remove stale temporary " << p.string() << ": " << ec.message() << "\n";
      else
        std::cerr << "pipecut: removed stale temporary " << p.string() << " (its writer, process " << pid
                  << ", is gone)\n";
    }
    ::close(fd);
  }
}

// Takes an exclusive lock on `path` without waiting; returns the fd (-1 if the
// path cannot be opened). A lock that cannot be had (EWOULDBLOCK, or no flock
// support) still returns the fd: the pid check then keeps sweepers off.
int openLocked(const fs::path& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0666);
  if (fd >= 0) ::flock(fd, LOCK_EX | LOCK_NB);
  return fd;
}

void removeOrWarn(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) std::cerr << "pipecut: warning: cannot remove " << p.string() << ": " << ec.message() << "\n";
}

// Puts the complete directory `tmp` at `dst`, where checkDestination allowed
// whatever stands (a previous output, or with --force anything of its type
// or a link).
void placeDirectory(const fs::path& tmp, const fs::path& dst) {
  struct stat st;
  if (::lstat(dst.c_str(), &st) == 0) {
    // Lock the previous tree too: after the swap it lies at our temporary's
    // name until removed, and must look live to sweepers until then.
    int oldFd = S_ISDIR(st.st_mode) ? openLocked(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : -1;
    // The swap is one step: no instant without a complete `dst`.
    if (::syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) == 0) {
      removeOrWarn(tmp);
      if (oldFd >= 0) ::close(oldFd);
      return;
    }
    int err = errno;
    if (err == EINVAL || err == ENOSYS) {
      // No exchange here (old kernel, some network or FUSE filesystems): move
      // the previous tree aside first. `dst` is briefly missing; a writer
      // killed in that instant leaves both trees for the sweep.
      fs::path old = dst.string() + ".old." + std::to_string(::getpid());
      if (::rename(dst.c_str(), old.c_str()) != 0) throwOsError(dst.string(), "move the previous output aside", errno);
      if (::rename(tmp.c_str(), dst.c_str()) != 0) {
        int why = errno;
        ::rename(old.c_str(), dst.c_str());
        throwOsError(dst.string(), "rename into place", why);
      }
      removeOrWarn(old);
      if (oldFd >= 0) ::close(oldFd);
      return;
    }
    if (oldFd >= 0) ::close(oldFd);
    if (err != ENOENT) throwOsError(dst.string(), "swap into place", err);  // ENOENT: `dst` vanished meanwhile
  }
  if (::rename(tmp.c_str(), dst.c_str()) != 0) throwOsError(dst.string(), "rename into place", errno);
}

// `-o out/` names `out`: its temporary is `out.tmp.<pid>` beside it, not inside.
fs::path normalizedDestination(const fs::path& given) {
  fs::path dst = given.lexically_normal();
  if (!dst.has_filename() && dst.has_relative_path()) dst = dst.parent_path();
  return dst;
}

// The entry a write would replace, with every directory above it resolved
// (a link there is followed), but not the entry itself (a link at `dst` is
// what would be replaced, not what it points to).
fs::path entryPath(const fs::path& dst) {
  std::error_code ec;
  fs::path abs = fs::absolute(dst, ec);
  if (ec) return dst;
  if (!abs.has_filename()) return fs::weakly_canonical(abs, ec);  // "/", or "x/.." forms
  fs::path name = abs.filename();
  if (name == "." || name == "..") return fs::weakly_canonical(abs, ec);
  fs::path parent = fs::weakly_canonical(abs.parent_path(), ec);
  return ec ? abs : parent / name;
}

// `a` is `b` or a directory above it (both absolute and normal).
bool holds(const fs::path& a, const fs::path& b) {
  auto ai = a.begin(), bi = b.begin();
  for (; ai != a.end(); ++ai, ++bi)
    if (bi == b.end() || *ai != *bi) return false;
  return true;
}

// Control characters in a file name would reach the terminal as they are.
std::string shownName(const std::string& name) {
  std::string out = "'";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

std::string listSome(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + shownName(names[i]);
  if (names.size() > 3) out += ", ...";
  return out;
}

std::string entries(size_t n) { return std::to_string(n) + (n == 1 ? " entry" : " entries"); }

[[noreturn]] void refuse(const fs::path& dst, const std::string& why) {
  throw Error(ErrorKind::InvalidInput, dst.string(), "", why);
}

}  // namespace

std::string describeDirectory(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) return std::string("a directory that cannot be read (") + ec.message() + ")";
  if (names.empty()) return "an empty directory";
  std::sort(names.begin(), names.end());
  return "a directory of " + entries(names.size()) + ": " + listSome(names);
}

std::string unlistedEntries(const fs::path& dir, const std::vector<std::string>& listed, const std::string& whose) {
  std::set<std::string> known(listed.begin(), listed.end());
  std::vector<std::string> extra;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!known.count(name)) extra.push_back(name);
  }
  if (ec) return std::string("cannot be read (") + ec.message() + ")";
  if (extra.empty()) return "";
  std::sort(extra.begin(), extra.end());
  return "holds " + entries(extra.size()) + " " + whose + " does not list: " + listSome(extra);
}

std::string startsWithMarker(const fs::path& file, const std::string& marker, const std::string& describe) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::string("cannot be read (") + std::strerror(errno) + ")";
  std::string head(marker.size(), '\0');
  size_t got = 0;
  while (got < head.size()) {
    ssize_t n = ::read(fd, head.data() + got, head.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got == marker.size() && head == marker) return "";
  return "is a file pipecut did not write (it does not start with " + describe + ")";
}

std::string jsonFieldInTheWay(const fs::path& file, const std::string& pointer, const std::string& value) {
  const std::string notOurs = "is a file pipecut did not write (no JSON field " + pointer + " = \"" + value + "\")";
  std::error_code ec;
  auto size = fs::file_size(file, ec);
  if (ec || size > (256u << 20)) return notOurs;
  std::ifstream in(file, std::ios::binary);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return notOurs;
  try {
    const auto& field = j.at(nlohmann::json::json_pointer(pointer));
    return field.is_string() && field.get<std::string>() == value ? "" : notOurs;
  } catch (const std::exception&) {
    return notOurs;
  }
}

void checkDestination(const Destination& d) {
  const fs::path dst = normalizedDestination(d.path);
  if (dst.empty()) refuse(d.path, "an empty path names no " + d.what);
  const bool dir = d.kind == StagedKind::Directory;
  const fs::path entry = entryPath(dst);
  std::error_code ec;

  // Rule 1: what no output replaces, with or without --force.
  auto protect = [&](const fs::path& p, const std::string& role) {
    if (p.empty()) return;
    fs::path c = fs::weakly_canonical(p, ec);
    if (ec) return;
    if (entry == c) refuse(dst, "is " + role + "; pipecut never replaces it");
    if (holds(entry, c)) refuse(dst, "holds " + role + " (" + c.string() + "); pipecut never replaces it");
  };
  protect("/", "the root directory");
  protect(fs::current_path(ec), "the current directory");
  if (const char* home = std::getenv("HOME"); home && *home) protect(home, "the home directory");
  for (const auto& input : d.inputs) {
    fs::path resolved = fs::weakly_canonical(input, ec);
    if (ec) continue;
    // A link to an input: replacing the link's directory loses the link,
    // replacing the target's loses the input.
    for (const fs::path& c : {resolved, entryPath(input)}) {
      bool inputIsDir = fs::is_directory(c, ec);
      if (entry == c) {
        if (dir && inputIsDir && d.previousOutput && d.previousOutput(entry).empty()) continue;  // resumed in place
        refuse(dst, "is this command's input " + shownName(input.string()) + "; pipecut never replaces it");
      }
      if (holds(entry, c))
        refuse(dst, "holds this command's input " + shownName(input.string()) + "; pipecut never replaces it");
      if (inputIsDir && holds(c, entry))
        refuse(dst, "lies inside this command's input " + shownName(input.string()) + "; pipecut never writes there");
    }
  }

  struct stat st;
  if (::lstat(dst.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // nothing there
    throwOsError(dst.string(), "look at the destination", errno);
  }
  const std::string force = "; pipecut replaces only its own " + d.what + " (--force replaces it anyway)";
  if (S_ISLNK(st.st_mode)) {
    if (d.force) return;
    std::string target = fs::read_symlink(dst, ec).string();
    refuse(dst, "is a symbolic link (to " + shownName(target) + "), which would be replaced, not followed; name its "
                "target" + force);
  }
  // Rule 2: never one type for the other.
  if (dir && !S_ISDIR(st.st_mode)) refuse(dst, "exists and is not a directory; the " + d.what + " is one");
  if (!dir && S_ISDIR(st.st_mode)) refuse(dst, "is a directory; the " + d.what + " is a file");
  if (!dir && !S_ISREG(st.st_mode)) refuse(dst, "is not a regular file (a device, FIFO or socket); the " + d.what +
                                                    " is written beside its destination and renamed over it");
  // Rules 3 and 4.
  std::string inTheWay = d.previousOutput ? d.previousOutput(dst)
                         : dir           ? "is " + describeDirectory(dst)
                                         : "is a file pipecut did not write";
  if (inTheWay.empty() || d.force) return;
  refuse(dst, inTheWay + force);
}

fs::path temporaryPath(const Destination& d, long pid) {
  return normalizedDestination(d.path).string() + ".tmp." + std::to_string(pid);
}

void writeStaged(const Destination& d, const std::function<void(const fs::path& temp)>& write) {
  checkDestination(d);
  const fs::path dst = normalizedDestination(d.path);
  const bool dir = d.kind == StagedKind::Directory;
  std::error_code ec;
  if (dir && !dst.parent_path().empty() && !fs::create_directories(dst.parent_path(), ec) && ec)
    throwOsError(dst.string(), "create the parent directory", ec.value());
  sweep(dst, dir);  // files are renamed straight over `dst`: they never leave `.old.`

  fs::path tmp = temporaryPath(d, ::getpid());
  int fd;
  if (dir) {
    if (::mkdir(tmp.c_str(), 0777) != 0) throwOsError(dst.string(), "create " + tmp.string(), errno);
    fd = openLocked(tmp, O_RDONLY | O_DIRECTORY);
  } else {
    fd = openLocked(tmp, O_WRONLY | O_CREAT | O_EXCL);
    if (fd < 0) throwOsError(dst.string(), "create " + tmp.string(), errno);
  }
  // From here to the rename, a live writer holds `fd`'s lock (pid alive, too).
  try {
    write(tmp);
    if (dir) placeDirectory(tmp, dst);
    else if (::rename(tmp.c_str(), dst.c_str()) != 0) throwOsError(dst.string(), "rename into place", errno);
  } catch (...) {
    fs::remove_all(tmp, ec);
    if (fd >= 0) ::close(fd);
    throw;
  }
  if (fd >= 0) ::close(fd);
}

void writeFileStaged(const Destination& d, const std::function<void(const ByteSink&)>& produce) {
  writeStaged(d, [&](const fs::path& tmp) {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) throwOsError(d.path.string(), "write", errno);
    try {
      produce([&](const void* data, size_t n) {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
          ssize_t k = ::write(fd, p, n);
          if (k < 0 && errno == EINTR) continue;
          if (k < 0) throwOsError(d.path.string(), "write", errno);
          p += k;
          n -= static_cast<size_t>(k);
        }
      });
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throwOsError(d.path.string(), "write", errno);
  });
}

}  // namespace pipecut::support
