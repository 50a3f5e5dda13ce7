#include "runtime/trace.h"


#include <nlohmann/json.hpp>

#include "runtime/outputs.h"
#include "support/error.h"

namespace pipecut::runtime {

std::string rankTracePath(const std::string& path, int rank, int world) {
  if (world <= 1) return path;
  size_t dot = path.rfind('.'), slash = path.rfind('/');
  std::string suffix = ".rank" + std::to_string(rank);
  bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  return ext ? path.substr(0, dot) + suffix + path.substr(dot) : path + suffix;
}

void Trace::add(std::string name, const char* category, int tid, Clock::time_point begin, Clock::time_point end) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lk(mu_);
  events_.push_back(Event{std::move(name), category, tid,
                          std::chrono::duration<double, std::micro>(begin - origin_).count(),
                          std::chrono::duration<double, std::micro>(end - begin).count()});
}

void Trace::write(const support::Destination& dst, const std::map<int, std::string>& threads) const {
  nlohmann::json events = nlohmann::json::array();
  std::lock_guard<std::mutex> lk(mu_);
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"args", {{"name", "rank " + std::to_string(pid_)}}}});
  for (const auto& [tid, name] : threads)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", tid}, {"args", {{"name", name}}}});
  for (const auto& e : events_)
    events.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", pid_}, {"tid", e.tid},
                      {"ts", e.tsUs}, {"dur", e.durUs}});
  std::string text = nlohmann::json{{"traceEvents", events},
                                    {"displayTimeUnit", "ms"},
                                    {"otherData", {{"format", kTraceFormat},
                                                   // Where ts 0 lies on this machine's steady clock (CLOCK_MONOTONIC,
                                                   // shared by its processes): ranks' traces line up by it.
                                                   {"origin_steady_us", std::chrono::duration<double, std::micro>(
                                                                            origin_.time_since_epoch()).count()}}}}
                         .dump() +
                     "\n";
  support::writeFileStaged(dst, [&](const support::ByteSink& sink) { sink(text.data(), text.size()); });
}

}  // namespace pipecut::runtime
