// `pipecut normalize`: read and normalize as every command does, write.
#include "commands.h"
#include "driver/load.h"
#include "pt2/package.h"

namespace pipecut::cli {

int runNormalize(const NormalizeOptions& o) {
  driver::LoadOptions load;
  load.moduleContiguous = o.moduleContiguous;
  load.verifyEach = o.verifyEach;
  const support::Destination dst = pt2::packageDestination(o.output, {o.model}, o.force);
  support::checkDestination(dst);  // before the model is read, not after
  pt2::writePackageFile(driver::loadNormalized(o.model, load), dst);
  return 0;
}

}  // namespace pipecut::cli
