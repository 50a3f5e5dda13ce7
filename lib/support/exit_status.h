#pragma once
// How a command-line tool ends on an exception: one mapping from what went
// wrong to an exit code and a line on stderr, shared by pipecut and
// pipecut-run, so that an error class never means two things.
//   1 usage, 2 invalid input, 3 a bug in pipecut, 5 a rank failed (runner),
//   6 the environment refused (disk full, read-only, permission, busy).
// An operating system error that reaches the top as something other than a
// pipecut::Error (std::filesystem's, a std::system_error) is classed by its
// errno like throwOsError's; anything else unexpected is a bug: 3.
#include <exception>
#include <string>

namespace pipecut::support {

// Call inside a catch block: prints "<tool>: error: ..." (or "internal
// error:" for 3) on stderr and returns the exit code.
int exitStatusFor(const std::exception_ptr& e, const std::string& tool);

}  // namespace pipecut::support
