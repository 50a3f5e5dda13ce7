#include "support/staging.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

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

std::string errnoText() { return std::strerror(errno); }

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

// Puts the complete directory `tmp` at `dst`.
void placeDirectory(const fs::path& tmp, const fs::path& dst) {
  struct stat st;
  if (::stat(dst.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw Error(ErrorKind::InvalidInput, dst.string(), "", "exists and is not a directory");
    // Lock the previous tree too: after the swap it lies at our temporary's
    // name until removed, and must look live to sweepers until then.
    int oldFd = openLocked(dst, O_RDONLY | O_DIRECTORY);
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
      if (::rename(dst.c_str(), old.c_str()) != 0)
        throw Error(ErrorKind::Internal, dst.string(), "", "cannot move the previous output aside: " + errnoText());
      if (::rename(tmp.c_str(), dst.c_str()) != 0) {
        std::string why = errnoText();
        ::rename(old.c_str(), dst.c_str());
        throw Error(ErrorKind::Internal, dst.string(), "", "cannot rename into place: " + why);
      }
      removeOrWarn(old);
      if (oldFd >= 0) ::close(oldFd);
      return;
    }
    if (oldFd >= 0) ::close(oldFd);
    if (err != ENOENT)  // ENOENT: `dst` vanished meanwhile; a plain rename will do
      throw Error(ErrorKind::Internal, dst.string(), "", std::string("cannot swap into place: ") + std::strerror(err));
  }
  if (::rename(tmp.c_str(), dst.c_str()) != 0)
    throw Error(ErrorKind::Internal, dst.string(), "", "cannot rename into place: " + errnoText());
}

}  // namespace

void writeStaged(const fs::path& given, StagedKind kind, const std::function<void(const fs::path& temp)>& write) {
  // `-o out/` names `out`: its temporary is `out.tmp.<pid>` beside it, not inside.
  fs::path dst = given.lexically_normal();
  if (!dst.has_filename() && dst.has_relative_path()) dst = dst.parent_path();
  bool dir = kind == StagedKind::Directory;
  struct stat st;
  // Refuse before writing anything rather than after writing gigabytes.
  if (dir && ::stat(dst.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw Error(ErrorKind::InvalidInput, dst.string(), "", "exists and is not a directory");
  std::error_code ec;
  if (dir && !dst.parent_path().empty() && !fs::create_directories(dst.parent_path(), ec) && ec)
    throw Error(ErrorKind::Internal, dst.string(), "", "cannot create the parent directory: " + ec.message());
  sweep(dst, dir);  // files are renamed straight over `dst`: they never leave `.old.`

  fs::path tmp = dst.string() + ".tmp." + std::to_string(::getpid());
  int fd;
  if (dir) {
    if (::mkdir(tmp.c_str(), 0777) != 0)
      throw Error(ErrorKind::Internal, dst.string(), "", "cannot create " + tmp.string() + ": " + errnoText());
    fd = openLocked(tmp, O_RDONLY | O_DIRECTORY);
  } else {
    fd = openLocked(tmp, O_WRONLY | O_CREAT | O_EXCL);
    if (fd < 0) throw Error(ErrorKind::InvalidInput, dst.string(), "", "cannot create output: " + errnoText());
  }
  // From here to the rename, a live writer holds `fd`'s lock (pid alive, too).
  try {
    write(tmp);
    if (dir) placeDirectory(tmp, dst);
    else if (::rename(tmp.c_str(), dst.c_str()) != 0)
      throw Error(ErrorKind::Internal, dst.string(), "", "cannot rename into place: " + errnoText());
  } catch (...) {
    fs::remove_all(tmp, ec);
    if (fd >= 0) ::close(fd);
    throw;
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace pipecut::support
