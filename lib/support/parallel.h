#pragma once
// One way to spread independent jobs over the cores (stage files at split,
// file hashes at verify and before a run), with errors that do not depend on
// thread timing.
#include <cstddef>
#include <functional>

namespace pipecut::support {

// Runs work(i) for every i in [0, count) on up to `threads` threads (0: the
// machine's cores; the calling thread is one of them). Indices start in
// increasing order; after a failure no new index starts. Once all have
// stopped, the failure with the lowest index is rethrown: every index below
// it had started, so which error surfaces is the same on every run.
void parallelFor(size_t count, unsigned threads, const std::function<void(size_t)>& work);

}  // namespace pipecut::support
