#include "runtime/transfer_probe.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/error.h"

namespace pipecut::runtime {

namespace {

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

[[noreturn]] void socketFailed(const char* what) {
  internalError("--profile", std::string("the loopback transfer probe could not ") + what + ": " + std::strerror(errno));
}

// Closes the descriptor it holds on every path out.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

TransferRate probeLoopbackTransfer(size_t messageBytes, int messages) {
  Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  if (listener.fd < 0) socketFailed("open a socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) socketFailed("bind to 127.0.0.1");
  if (::listen(listener.fd, 1) != 0) socketFailed("listen");
  if (::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) socketFailed("read its port");
  Fd sender(::socket(AF_INET, SOCK_STREAM, 0));
  if (sender.fd < 0) socketFailed("open a socket");
  if (::connect(sender.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) socketFailed("connect");
  Fd receiver(::accept(listener.fd, nullptr, nullptr));
  if (receiver.fd < 0) socketFailed("accept");
  int one = 1;
  ::setsockopt(sender.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  const int total = messages + 1;  // the first warms the buffers and the socket
  std::vector<char> out(messageBytes, 1), in(messageBytes);
  // Moves one message through `io` (send or recv) and returns its thread's
  // CPU time, or a negative value when the socket failed.
  auto timed = [&](auto&& io, char* data) {
    double t0 = threadCpuMs();
    for (size_t done = 0; done < messageBytes;) {
      ssize_t k = io(data + done, messageBytes - done);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return -1.0;
      done += static_cast<size_t>(k);
    }
    return threadCpuMs() - t0;
  };
  std::vector<double> sendMs, recvMs;
  bool sendFailed = false, recvFailed = false;
  std::thread writer([&] {
    for (int m = 0; m < total && !sendFailed; ++m) {
      double ms = timed([&](char* p, size_t n) { return ::send(sender.fd, p, n, MSG_NOSIGNAL); }, out.data());
      if (ms < 0) sendFailed = true;
      else if (m > 0) sendMs.push_back(ms);
    }
  });
  for (int m = 0; m < total && !recvFailed; ++m) {
    double ms = timed([&](char* p, size_t n) { return ::recv(receiver.fd, p, n, 0); }, in.data());
    if (ms < 0) recvFailed = true;
    else if (m > 0) recvMs.push_back(ms);
  }
  if (recvFailed) ::shutdown(sender.fd, SHUT_RDWR);
  writer.join();
  if (sendFailed || recvFailed) socketFailed("move its messages");
  TransferRate r;
  r.method = "loopback-tcp";
  r.messageBytes = messageBytes;
  const double mib = static_cast<double>(messageBytes) / (1 << 20);
  r.sendMsPerMiB = median(sendMs) / mib;
  r.recvMsPerMiB = median(recvMs) / mib;
  return r;
}

}  // namespace pipecut::runtime
