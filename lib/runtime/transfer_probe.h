#pragma once
// What moving bytes between two ranks of one machine costs the CPUs that also
// run the stages: `pipecut-run --profile` measures it beside the node times so
// that `pipecut split --balance time` can charge each stage for the boundary
// values it receives and sends, and stage 0 (rank 0) for the final outputs it
// receives. Gloo moves a CPU tensor as one TCP message, so the probe does the
// same over a loopback socket and reads each side's thread CPU time: on a
// rank that shares its core with its stage, that time is taken from compute.
// Torch-free.
#include <cstddef>
#include <string>

namespace pipecut::runtime {

struct TransferRate {
  std::string method;          // what was measured ("loopback-tcp")
  size_t messageBytes = 0;     // the size of each message sent
  double sendMsPerMiB = 0;     // sender's CPU time per MiB (median over messages)
  double recvMsPerMiB = 0;     // receiver's CPU time per MiB
};

// Sends `messages` messages of `messageBytes` after one unmeasured message.
// Throws pipecut::Error (Internal) when the loopback socket cannot be set up.
TransferRate probeLoopbackTransfer(size_t messageBytes = size_t{16} << 20, int messages = 6);

}  // namespace pipecut::runtime
