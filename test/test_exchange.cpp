// runtime/exchange.h: rank 0's output sink (what it keeps of each
// micro-batch) and the mailbox both executors receive into.
// Torch's headers first: c10's logging defines CHECK, which Catch's must
// replace (the other order leaves c10's, which Catch never counts).
#include <ATen/ATen.h>

#include <thread>

#include "runtime/exchange.h"

#include <catch2/catch.hpp>

using pipecut::runtime::Aborted;
using pipecut::runtime::Mailbox;
using pipecut::runtime::Payload;
using pipecut::runtime::Sink;

namespace {
Payload value(double x) { return Payload{at::full({1}, x), nullptr}; }
}  // namespace

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

TEST_CASE("the mailbox gives a micro-batch whole (take) or one slot at a time (takeOne)", "[exchange]") {
  // Inference's use: a stage takes all its inputs of a micro-batch at once.
  Mailbox stage(2, 4);
  stage.put(0, 1, value(1));
  stage.deliver(0, 0, value(0));  // another rank's value, through the communication thread
  stage.put(1, 0, value(10));
  CHECK(stage.held() == 3);
  auto mb0 = stage.take(0);
  REQUIRE(mb0.size() == 2);
  CHECK(mb0[0].tensor.item<double>() == 0);
  CHECK(mb0[1].tensor.item<double>() == 1);
  CHECK(stage.held() == 1);

  // Training's use: messages on channels, taken in the order the worker's
  // actions need them, whatever order they arrived in; a wait ends when its
  // message arrives.
  Mailbox worker(4, Mailbox::kUnbounded);
  worker.deliver(3, 2, value(32));
  worker.deliver(1, 0, value(10));
  worker.deliver(1, 3, value(13));
  CHECK(worker.takeOne(1, 3).tensor.item<double>() == 13);
  CHECK(worker.takeOne(3, 2).tensor.item<double>() == 32);
  CHECK(worker.held() == 1);
  std::thread late([&] { worker.deliver(2, 1, value(21)); });
  CHECK(worker.takeOne(2, 1).tensor.item<double>() == 21);
  late.join();
  CHECK(worker.takeOne(1, 0).tensor.item<double>() == 10);
  CHECK(worker.held() == 0);

  // A slot taken is empty again: the next step's message of the same key waits.
  worker.deliver(1, 0, value(100));
  CHECK(worker.takeOne(1, 0).tensor.item<double>() == 100);

  // abort() ends a wait with Aborted, and refuses what comes later.
  std::thread stop([&] { worker.abort(); });
  CHECK_THROWS_AS(worker.takeOne(0, 0), Aborted);
  stop.join();
  CHECK_THROWS_AS(worker.deliver(0, 0, value(0)), Aborted);
  CHECK(worker.aborted());
}
