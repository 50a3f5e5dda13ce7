#include "support/progress.h"

#include <unistd.h>

#include <cstdio>

namespace pipecut::support {

bool stderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(bool enabled, std::function<std::string(double)> render)
    : render_(std::move(render)), start_(std::chrono::steady_clock::now()) {
  if (enabled) thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressLine::loop() {
  using namespace std::chrono;
  bool shown = false;
  size_t lastWidth = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, milliseconds(250), [this] { return stopping_; })) {
    double elapsed = duration<double>(steady_clock::now() - start_).count();
    if (elapsed < 2.0) continue;
    std::string line = render_(elapsed);
    // Pad over the rest of a longer previous line.
    size_t width = line.size();
    if (width < lastWidth) line.append(lastWidth - width, ' ');
    lastWidth = width;
    std::fprintf(stderr, "\r%s", line.c_str());
    std::fflush(stderr);
    shown = true;
  }
  if (shown) std::fprintf(stderr, "\n");
}

std::string humanBytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.0f MB", b / 1e6);
  else if (b >= 1e3) std::snprintf(buf, sizeof buf, "%.0f kB", b / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string humanBinaryBytes(uint64_t b) {
  char buf[32];
  if (b < 1024) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else if (b < (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else if (b < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

}  // namespace pipecut::support
