// Pickle bytes (the data.pkl of a torch.save file) -> pt2::pickleProblem, the
// walk older .pt2 layouts get before LibTorch's unpickler sees them. It
// returns a problem or nothing; it never throws. Checked afterwards: an
// accepted pickle ends in STOP.
#include "pt2/pickle_check.h"
#include "targets.h"

namespace pipecut::fuzz {

int pickle(const uint8_t* data, size_t size) {
  std::optional<std::string> problem;
  mustSucceed("pickleProblem", [&] { problem = pt2::pickleProblem(asText(data, size)); });
  if (problem) {
    lastOutcome() = {"pickleProblem", *problem};
    return 0;
  }
  lastOutcome() = {};
  if (size == 0 || data[size - 1] != '.') {
    // Accepted means the walk reached STOP; bytes after it are left alone.
    bool stop = false;
    for (size_t i = 0; i < size && !stop; ++i) stop = data[i] == '.';
    if (!stop) finding("an accepted pickle holds no STOP byte");
  }
  return 0;
}

}  // namespace pipecut::fuzz
