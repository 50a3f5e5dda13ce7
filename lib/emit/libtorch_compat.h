#pragma once
// What differs between the LibTorch versions pipecut builds against (torch
// 2.11 to 2.15: cmake/torch_versions.cmake), in one place: every other file
// is written against the names here, and no other file tests
// TORCH_VERSION_MAJOR or _MINOR. Each entry says which versions differ how;
// where a type can be taken from the API itself (decltype), it is, and a
// static_assert holds the versions to what this header says of them, so a
// release that changes one again fails to compile here, not somewhere else.
// Header-only: pt2/legacy_layout.cpp (LibTorch's unpickler, below emit in the
// layering) includes it as well as emit and runtime do.
//
// One difference is a build's, not a version's: NativeRT is in the wheels of
// 2.11 to 2.14 and not in 2.15's (ModelRunnerHandle declared, nothing
// defined). CMake links a probe (PIPECUT_HAVE_NATIVERT), and
// runtime/nativert_runner.h is the one place that uses it.
#include <memory>
#include <string>
#include <type_traits>

#include <c10/core/ScalarType.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/headeronly/version.h>

namespace pipecut::emit::compat {

// c10::getDtypeNames: a pair of std::string up to 2.14, a pair of
// std::string_view from 2.15. torch's own name of the dtype ("float32").
inline std::string dtypeName(c10::ScalarType t) { return std::string(c10::getDtypeNames(t).first); }

// The node an autograd edge leads to: held by std::shared_ptr up to 2.14, by
// c10::intrusive_ptr from 2.15. Both have get(), operator-> and bool.
using AutogradNodePtr = decltype(torch::autograd::Edge::function);
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR <= 14
static_assert(std::is_same_v<AutogradNodePtr, std::shared_ptr<torch::autograd::Node>>);
#else
static_assert(std::is_same_v<AutogradNodePtr, c10::intrusive_ptr<torch::autograd::Node>>);
#endif

}  // namespace pipecut::emit::compat
