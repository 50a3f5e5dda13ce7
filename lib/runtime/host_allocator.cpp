#include "runtime/host_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>

extern char** environ;

// mimalloc's, when the binary links it (tools/CMakeLists.txt); the runtime
// library does not depend on it.
extern "C" int mi_reserve_os_memory(size_t size, bool commit, bool allow_large) __attribute__((weak));

namespace pipecut::runtime {

namespace {

bool userTunedMalloc() {
  if (const char* v = std::getenv("PIPECUT_MALLOC_DEFAULTS"); v && std::strcmp(v, "1") == 0) return true;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MALLOC_", 7) == 0 || std::strncmp(*e, "GLIBC_TUNABLES=", 15) == 0 ||
        std::strncmp(*e, "MIMALLOC_", 9) == 0)
      return true;
  return false;
}

}  // namespace

void keepFreedHostMemory() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (userTunedMalloc()) return;
    // mimalloc gives a block over 16 MiB a segment of its own, unmapped when
    // freed: a [128 rows, 12 heads, 64, 64] attention operand faults its
    // 6,000 pages in again every layer of every step (2.1 million faults and
    // half the wall time of a 16-token generation at 128 rows, 200,000 with
    // the arena). From an arena it is reused instead. The arena is mapped up
    // front but not touched (mimalloc maps with MAP_NORESERVE: no resident
    // memory, no commit charge); at most the machine's memory in size.
    if (mi_reserve_os_memory) {
      const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
      if (pages > 0 && pageSize > 0) {
        size_t bytes = std::min<size_t>(static_cast<size_t>(pages) * static_cast<size_t>(pageSize), size_t{64} << 30);
        (void)mi_reserve_os_memory(bytes, /*commit=*/true, /*allow_large=*/false);  // failing, it is as before
      }
    }
#if defined(__GLIBC__)
    // Order matters little, but each call turns off glibc's dynamic threshold,
    // so all three are set.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc refuses more than half its 64 MiB heap size
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
  });
}

}  // namespace pipecut::runtime
