#include "support/exit_status.h"

#include <filesystem>
#include <iostream>
#include <system_error>

#include "support/error.h"

namespace pipecut::support {

int exitStatusFor(const std::exception_ptr& e, const std::string& tool) {
  auto print = [&](ErrorKind kind, const std::string& text) {
    std::cerr << tool << ": " << (kind == ErrorKind::Internal ? "internal error: " : "error: ") << text << "\n";
    return static_cast<int>(kind);
  };
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return print(err.kind(), err.what());
  } catch (const std::filesystem::filesystem_error& err) {
    const bool os = err.code().category() == std::generic_category() || err.code().category() == std::system_category();
    std::string path = err.path1().empty() ? "" : err.path1().string() + ": ";
    return print(os ? osErrorKind(err.code().value()) : ErrorKind::Internal, path + err.code().message());
  } catch (const std::system_error& err) {
    const bool os = err.code().category() == std::generic_category() || err.code().category() == std::system_category();
    return print(os ? osErrorKind(err.code().value()) : ErrorKind::Internal, firstLine(err.what()));
  } catch (const std::bad_alloc&) {
    return print(ErrorKind::Environment, "out of memory");
  } catch (const std::exception& err) {
    return print(ErrorKind::Internal, firstLine(err.what()));
  } catch (...) {
    return print(ErrorKind::Internal, "unknown exception");
  }
}

}  // namespace pipecut::support
