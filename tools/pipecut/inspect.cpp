#include <iostream>

#include "commands.h"
#include "driver/inspect.h"

namespace pipecut::cli {

int runInspect(const InspectOptions& o) {
  driver::InspectRequest r{o.model, o.json, o.dotFile, o.force, o.weights};
  r.support = {o.support, o.inlineGradRegions};
  driver::inspect(r, std::cout);
  return 0;
}

}  // namespace pipecut::cli
