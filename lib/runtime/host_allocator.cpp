#include "runtime/host_allocator.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

extern char** environ;

namespace pipecut::runtime {

namespace {

bool userTunedMalloc() {
  if (const char* v = std::getenv("PIPECUT_MALLOC_DEFAULTS"); v && std::strcmp(v, "1") == 0) return true;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MALLOC_", 7) == 0 || std::strncmp(*e, "GLIBC_TUNABLES=", 15) == 0) return true;
  return false;
}

}  // namespace

void keepFreedHostMemory() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__GLIBC__)
    if (userTunedMalloc()) return;
    // Order matters little, but each call turns off glibc's dynamic threshold,
    // so all three are set.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc refuses more than half its 64 MiB heap size
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
  });
}

}  // namespace pipecut::runtime
