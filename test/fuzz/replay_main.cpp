// pipecut_fuzz_replay TARGET FILE_OR_DIR...
// pipecut_fuzz_replay --all DIR...
//
// Runs a fuzz target (targets.h) on every file given, recursing into
// directories, with the fuzzers' contract: a refusal (InvalidInput) or
// acceptance is fine; anything else is a finding. The first finding (an
// abort, a crash signal, or a file running longer than --timeout seconds)
// prints the file's name and ends the run with a non-zero status.
// With --all, each DIR holds one subdirectory per target (DIR/<target>/...),
// e.g. testdata/fuzz; a target without one is skipped. Each file's line says
// whether it was accepted or which step refused it (-v: untruncated messages).
#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "targets.h"

// Under ASan (the standalone sanitized build), the sanitizer reports crashes
// and stack overflows itself; it names the file through its death callback.
#if defined(__SANITIZE_ADDRESS__)
#define PIPECUT_FUZZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PIPECUT_FUZZ_SANITIZED 1
#endif
#endif
#ifdef PIPECUT_FUZZ_SANITIZED
#include <sanitizer/common_interface_defs.h>
#endif

namespace fs = std::filesystem;
using pipecut::fuzz::Target;

namespace {

// The file being run, for the signal handlers (async-signal-safe: written with write(2)).
char g_current[4096] = "";
unsigned g_timeout = 60;

void say(const char* s) { (void)!::write(2, s, std::strlen(s)); }

extern "C" void onSignal(int sig) {
  say(sig == SIGALRM ? "\npipecut_fuzz_replay: FINDING (timeout) in " : "\npipecut_fuzz_replay: FINDING (");
  if (sig != SIGALRM) {
    say(strsignal(sig));
    say(") in ");
  }
  say(g_current);
  say("\n");
  if (sig == SIGALRM) ::_exit(124);
  std::raise(sig);  // SA_RESETHAND: the default action now
}

#ifdef PIPECUT_FUZZ_SANITIZED
extern "C" void onSanitizerDeath() {
  say("\npipecut_fuzz_replay: FINDING (sanitizer report above) in ");
  say(g_current);
  say("\n");
}
#endif

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const Target* findTarget(const std::string& name) {
  for (const Target& t : pipecut::fuzz::kTargets)
    if (name == t.name) return &t;
  return nullptr;
}

// Files under `path` (itself if a file), sorted, skipping README files and dotfiles.
std::vector<fs::path> inputsUnder(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      std::string name = e.path().filename().string();
      if (e.is_regular_file() && name[0] != '.' && name != "README.md") files.push_back(e.path());
    }
  } else if (fs::is_regular_file(path)) {
    files.push_back(path);
  } else {
    throw std::runtime_error(path.string() + ": no such file or directory");
  }
  std::sort(files.begin(), files.end());
  return files;
}

size_t replay(const Target& t, const fs::path& path, bool verbose) {
  size_t n = 0;
  for (const fs::path& f : inputsUnder(path)) {
    std::string bytes = readFile(f);
    std::snprintf(g_current, sizeof g_current, "%s (target %s)", f.c_str(), t.name);
    pipecut::fuzz::lastOutcome() = {};
    ::alarm(g_timeout);
    t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ::alarm(0);
    const auto& o = pipecut::fuzz::lastOutcome();
    std::cout << "  " << t.name << " " << f.string() << ": ";
    if (o.refusedBy.empty()) {
      std::cout << "accepted\n";
    } else {
      std::string msg = o.message;
      if (!verbose && msg.size() > 200) msg = msg.substr(0, 200) + "...";
      std::cout << "refused by " << o.refusedBy << ": " << msg << "\n";
    }
    std::cout.flush();
    ++n;
  }
  return n;
}

int usage() {
  std::cerr << "usage: pipecut_fuzz_replay [-v] [--timeout S] TARGET FILE_OR_DIR...\n"
               "       pipecut_fuzz_replay [-v] [--timeout S] --all DIR...   (DIR/<target>/ for each target)\n"
               "targets:";
  for (const Target& t : pipecut::fuzz::kTargets) std::cerr << " " << t.name;
  std::cerr << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool verbose = false, all = false;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-v") verbose = true;
    else if (args[i] == "--all") all = true;
    else if (args[i] == "--timeout" && i + 1 < args.size()) g_timeout = static_cast<unsigned>(std::stoul(args[++i]));
    else rest.push_back(args[i]);
  }
  // On an alternate stack, so that a stack overflow is reported too.
  static char altStack[1 << 16];
  stack_t ss{};
  ss.ss_sp = altStack;
  ss.ss_size = sizeof altStack;
  ::sigaltstack(&ss, nullptr);
#ifdef PIPECUT_FUZZ_SANITIZED
  __sanitizer_set_death_callback(onSanitizerDeath);
  const int signals[] = {SIGABRT, SIGALRM};
#else
  const int signals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGALRM};
#endif
  for (int sig : signals) {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
  try {
    if (all) {
      if (rest.empty()) return usage();
      for (const Target& t : pipecut::fuzz::kTargets) {
        size_t n = 0;
        for (const std::string& dir : rest)
          if (fs::is_directory(fs::path(dir) / t.name)) n += replay(t, fs::path(dir) / t.name, verbose);
        std::cout << t.name << ": " << n << " inputs, no findings\n";
      }
      return 0;
    }
    if (rest.size() < 2) return usage();
    const Target* t = findTarget(rest[0]);
    if (!t) {
      std::cerr << "pipecut_fuzz_replay: unknown target '" << rest[0] << "'\n";
      return usage();
    }
    size_t n = 0;
    for (size_t i = 1; i < rest.size(); ++i) n += replay(*t, rest[i], verbose);
    std::cout << t->name << ": " << n << " inputs, no findings\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "pipecut_fuzz_replay: " << e.what() << "\n";
    return 2;
  }
}
