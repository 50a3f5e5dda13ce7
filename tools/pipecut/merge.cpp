// `pipecut merge`: flags to a driver request, a summary to stdout.
#include <iostream>

#include "commands.h"
#include "driver/merge.h"

namespace pipecut::cli {

int runMerge(const MergeOptions& o) {
  driver::MergeRequest r;
  r.checkpoint = o.checkpoint;
  r.output = o.output;
  r.force = o.force;
  driver::MergeResult m = driver::mergeCheckpoint(r);
  if (!o.quiet)
    std::cout << "merged " << m.tensors << " tensors from " << m.stages << " stages into " << o.output << " ("
              << m.bytes << " bytes)\n";
  return 0;
}

}  // namespace pipecut::cli
