// `pipecut normalize`: read and normalize as every command does, write.
#include "commands.h"
#include "driver/load.h"
#include "pt2/package.h"

namespace pipecut::cli {

int runNormalize(const NormalizeOptions& o) {
  driver::LoadOptions load;
  load.moduleContiguous = o.moduleContiguous;
  load.verifyEach = o.verifyEach;
  pt2::writePackageFile(driver::loadNormalized(o.model, load), o.output);
  return 0;
}

}  // namespace pipecut::cli
