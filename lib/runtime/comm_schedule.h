#pragma once
// The order of every point-to-point message of a multi-process run. Pure
// data: no tensors, no c10d, so the ordering rules are unit-tested on their own.
//
// A message is (micro-batch g, edge e). Edges are the manifest's stage-output
// -> consumer connections that cross ranks, numbered in one total, stable
// order every rank derives from the same manifest: producer stage, then output
// index, then consumer index (a final output is an edge to rank 0). Every rank
// walks one global order of messages, by key
//
//     (g + producerStage(e), e)
//
// and its operations are that order restricted to the messages it sends or
// receives. So between any two ranks the sender issues its sends in exactly
// the order the receiver issues its receives: matching by order alone (NCCL,
// which ignores tags; Gloo with one tag) pairs every send with its receive.
//
// The order is a linear extension of what a message waits for, so a rank that
// blocks on its next operation never waits on a message that comes later:
// - message (g, e) needs its producer stage p to have run micro-batch g, which
//   needs p's inputs of micro-batch g: messages (g, e') from stages p' < p,
//   keys g + p' < g + p;
// - and p's previous micro-batch: keys g - 1 + p < g + p;
// - 1F1B admits micro-batch g into stage 0 once micro-batch g - P has left
//   the last stage: its final outputs have keys <= g - P + P - 1 < g.
// Equal keys never occur (e names the producer). The order is a wavefront:
// wave w holds micro-batch w of stage 0, w - 1 of stage 1, ..., so stages on
// different ranks work on different micro-batches at once.
#include <cstdint>
#include <vector>

#include "manifest/manifest.h"

namespace pipecut::runtime {

struct CommEdge {
  int id = 0;                  // position in the total order of all edges (local ones too)
  uint32_t producer = 0;       // producing stage
  uint32_t output = 0;         // index into its outputs
  uint32_t consumerIndex = 0;  // index into that output's consumers
  Consumer consumer;           // a stage input, or a user output (on rank 0)
  int srcRank = 0, dstRank = 0;
  bool crossesRanks() const { return srcRank != dstRank; }
};

// Every stage output -> consumer connection, in id order. stageRank: per stage.
std::vector<CommEdge> commEdges(const Manifest& m, const std::vector<int>& stageRank);

struct CommOp {
  int64_t microbatch = 0;
  int channel = 0;   // what it travels on: a CommEdge::id (inference); see stepCommOrder (training)
  bool send = false; // else a receive
  int peer = 0;
  // The first part of the global key: inference's wave, microbatch +
  // producer stage; a training step's nominal end tick of the sending action.
  int64_t wave = 0;
};

// The order every rank's communication thread follows (runtime/comm.h).
class MessageOrder {
 public:
  virtual ~MessageOrder() = default;
  // The next operation; false when there is none left.
  virtual bool next(CommOp& op) = 0;
};

// Operations listed ahead, e.g. a training step's (runtime/train/transport.h).
class OpList : public MessageOrder {
 public:
  explicit OpList(const std::vector<CommOp>& ops) : ops_(ops) {}
  bool next(CommOp& op) override {
    if (pos_ >= ops_.size()) return false;
    op = ops_[pos_++];
    return true;
  }

 private:
  const std::vector<CommOp>& ops_;
  size_t pos_ = 0;
};

// One rank's operations for `total` micro-batches, produced lazily (a run of
// a million micro-batches needs no list of them), in the global order.
class CommSchedule : public MessageOrder {
 public:
  CommSchedule(const std::vector<CommEdge>& edges, int rank, int64_t total);
  bool next(CommOp& op) override;

 private:
  std::vector<CommEdge> mine_;  // edges this rank sends or receives, in id order
  int rank_;
  int64_t total_;
  int64_t wave_ = 0, lastWave_ = -1;
  size_t pos_ = 0;
};

}  // namespace pipecut::runtime
