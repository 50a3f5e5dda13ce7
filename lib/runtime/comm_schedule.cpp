#include "runtime/comm_schedule.h"

#include <algorithm>

namespace pipecut::runtime {

std::vector<CommEdge> commEdges(const Manifest& m, const std::vector<int>& stageRank) {
  std::vector<CommEdge> edges;
  for (const auto& st : m.stages)
    for (uint32_t o = 0; o < st.outputs.size(); ++o)
      for (uint32_t c = 0; c < st.outputs[o].consumers.size(); ++c) {
        CommEdge e;
        e.id = static_cast<int>(edges.size());
        e.producer = st.index;
        e.output = o;
        e.consumerIndex = c;
        e.consumer = st.outputs[o].consumers[c];
        e.srcRank = stageRank.at(st.index);
        e.dstRank = e.consumer.kind == Consumer::Kind::StageInput ? stageRank.at(e.consumer.stage) : 0;
        edges.push_back(e);
      }
  return edges;
}

CommSchedule::CommSchedule(const std::vector<CommEdge>& edges, int rank, int64_t total) : rank_(rank), total_(total) {
  for (const auto& e : edges)
    if (e.crossesRanks() && (e.srcRank == rank || e.dstRank == rank)) {
      mine_.push_back(e);
      lastWave_ = std::max<int64_t>(lastWave_, total - 1 + e.producer);
    }
}

bool CommSchedule::next(CommOp& op) {
  // Within a wave, edges go by id; an edge whose micro-batch g = wave - producer
  // is outside [0, total) has nothing in this wave.
  while (wave_ <= lastWave_) {
    while (pos_ < mine_.size()) {
      const CommEdge& e = mine_[pos_++];
      int64_t g = wave_ - static_cast<int64_t>(e.producer);
      if (g < 0 || g >= total_) continue;
      op.microbatch = g;
      op.channel = e.id;
      op.send = e.srcRank == rank_;
      op.peer = op.send ? e.dstRank : e.srcRank;
      op.wave = wave_;
      return true;
    }
    pos_ = 0;
    ++wave_;
  }
  return false;
}

}  // namespace pipecut::runtime
