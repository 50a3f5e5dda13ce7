#include <iostream>

#include "commands.h"
#include "driver/inspect.h"

namespace pipecut::cli {

int runInspect(const InspectOptions& o) {
  driver::inspect({o.model, o.json, o.dotFile, o.force, o.weights}, std::cout);
  return 0;
}

}  // namespace pipecut::cli
