// Rank 0's output sink (runtime/exchange.h): what it keeps of each micro-batch.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "runtime/exchange.h"

using pipecut::runtime::Sink;

TEST_CASE("the output sink keeps only the micro-batches from keepFrom on", "[exchange]") {
  // Two iterations of 2 micro-batches, 2 outputs each: the first iteration's
  // tensors go when each of its micro-batches completes, the last one's stay.
  Sink sink;
  sink.reset(4, 2, 2);
  for (int64_t mb = 0; mb < 4; ++mb) {
    CHECK_FALSE(sink.put(mb, 0, at::full({1}, static_cast<double>(mb))));
    CHECK(sink.put(mb, 1, at::full({1}, static_cast<double>(10 + mb))));
  }
  CHECK(sink.complete() == 4);
  CHECK(sink.values_[0].empty());
  CHECK(sink.values_[1].empty());
  for (size_t mb = 2; mb < 4; ++mb) {
    REQUIRE(sink.values_[mb].size() == 2);
    CHECK(sink.values_[mb][0].item<double>() == static_cast<double>(mb));
    CHECK(sink.values_[mb][1].item<double>() == static_cast<double>(10 + mb));
  }
  for (const auto& t : sink.done_) CHECK(t != Sink::Clock::time_point{});  // latency stays measurable for all
}
