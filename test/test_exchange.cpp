// runtime/exchange.h: rank 0's output sink (what it keeps of each
// micro-batch) and the mailbox both executors receive into; and
// runtime/output_drain.h, which lands final outputs off the producers'
// threads (its CUDA copy runs in scripts/gpu_check.sh; its queue here).
// Torch's headers first: c10's logging defines CHECK, which Catch's must
// replace (the other order leaves c10's, which Catch never counts).
#include <ATen/ATen.h>

#include <future>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/exchange.h"
#include "runtime/output_drain.h"

#include <catch2/catch.hpp>

using pipecut::runtime::Aborted;
using pipecut::runtime::Mailbox;
using pipecut::runtime::OutputDrain;
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

TEST_CASE("the output drain hands outputs on once landed, in order, and stops on abort", "[exchange]") {
  std::vector<std::pair<int64_t, double>> got;  // (micro-batch, value), as handed on
  std::thread::id handedOn;
  OutputDrain drain([&](int64_t g, size_t j, at::Tensor host) {
    CHECK(j == 0);
    got.emplace_back(g, host.item<double>());
    handedOn = std::this_thread::get_id();
  });

  // A host tensor is handed on at once, on the caller's thread.
  drain.put(0, 0, at::full({1}, 5.0), nullptr);
  REQUIRE(got.size() == 1);
  CHECK(handedOn == std::this_thread::get_id());

  // Queued ones wait for their copy: nothing is handed on before the first
  // lands, then both in the order queued, on the drain's thread.
  std::promise<void> land;
  std::shared_future<void> landed = land.get_future().share();
  drain.pending(1, 0, at::full({1}, 6.0), [landed] { landed.wait(); });
  drain.pending(2, 0, at::full({1}, 7.0), [] {});
  std::thread runner([&] { drain.run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(got.size() == 1);  // the first wait holds up the one behind it
  land.set_value();
  drain.close();
  runner.join();  // close(): returns once every queued output was handed on
  REQUIRE(got.size() == 3);
  CHECK(got[1] == std::make_pair<int64_t, double>(1, 6.0));
  CHECK(got[2] == std::make_pair<int64_t, double>(2, 7.0));
  CHECK(handedOn != std::this_thread::get_id());

  // abort(): the wait in progress ends the drain with Aborted; what is left is
  // dropped, not handed on (a failed run writes nothing).
  OutputDrain failing([&](int64_t g, size_t, at::Tensor) { got.emplace_back(g, -1); });
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  failing.pending(3, 0, at::full({1}, 0.0), [released] { released.wait(); });
  failing.pending(4, 0, at::full({1}, 0.0), [] {});
  std::promise<void> ended;
  std::thread stopped([&] {
    try {
      failing.run();
    } catch (const Aborted&) {
      ended.set_value();
    }
  });
  failing.abort();
  release.set_value();
  stopped.join();
  CHECK(ended.get_future().wait_for(std::chrono::seconds(0)) == std::future_status::ready);
  CHECK(got.size() == 3);

  // A failed wait (a CUDA error) comes out of run() as it was thrown.
  OutputDrain broken([&](int64_t g, size_t, at::Tensor) { got.emplace_back(g, -2); });
  broken.pending(5, 0, at::full({1}, 0.0), [] { throw std::runtime_error("copy failed"); });
  broken.close();
  CHECK_THROWS_WITH(broken.run(), "copy failed");
  CHECK(got.size() == 3);
}
