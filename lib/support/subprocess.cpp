#include "support/subprocess.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "support/error.h"

extern char** environ;

namespace pipecut::support {

namespace {

constexpr size_t kKeptOutput = 1 << 20;

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) throw Error(osErrorKind(errno), "", "pipe", std::strerror(errno));
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close(int end) {
    if (fd[end] >= 0) ::close(fd[end]);
    fd[end] = -1;
  }
};

}  // namespace

ProcessResult runProcess(const ProcessRequest& r) {
  if (r.argv.empty()) internalError("runProcess", "no program");
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const auto& [k, v] : r.environment) replaced = replaced || entry.rfind(k + "=", 0) == 0;
    if (!replaced) env.push_back(std::move(entry));
  }
  for (const auto& [k, v] : r.environment) env.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  Pipe in, out;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 2);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(ErrorKind::InvalidInput, r.argv[0], "", std::string("cannot run it: ") + std::strerror(rc));
  in.close(0);
  out.close(1);

  // stdin from a thread of its own: a child that writes a lot before it
  // reads all of its input must not deadlock against us.
  std::thread feeder([&in, &r] {
    // A child that exits without reading it all must not kill us with
    // SIGPIPE: blocked here, the write fails with EPIPE instead (the signal
    // is this thread's and goes with it).
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    size_t done = 0;
    while (done < r.input.size()) {
      ssize_t n = ::write(in.fd[1], r.input.data() + done, r.input.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the child closed its stdin (EPIPE): it has what it wanted
      done += static_cast<size_t>(n);
    }
    in.close(1);
  });
  ProcessResult result;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(out.fd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<size_t>(n));
    if (result.output.size() > 2 * kKeptOutput) result.output.erase(0, result.output.size() - kKeptOutput);
  }
  feeder.join();
  if (result.output.size() > kKeptOutput) result.output.erase(0, result.output.size() - kKeptOutput);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace pipecut::support
