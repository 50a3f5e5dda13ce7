# `cmake --install BUILD --prefix PREFIX`: the tools, the embeddable runtime
# (libpipecut.so, lib/CMakeLists.txt's pipecut_embed) with its headers, and a
# CMake package, so that a consumer's
#   find_package(pipecut REQUIRED)
#   target_link_libraries(app PRIVATE pipecut::runtime)
# builds against PREFIX with no torch at all (docs/embedding.md).
#   PREFIX/bin/pipecut, pipecut-run
#   PREFIX/lib/libpipecut.so*
#   PREFIX/include/pipecut/pipecut.h, runtime/*.h, support/error.h, weights/options.h
#   PREFIX/lib/cmake/pipecut/pipecutConfig.cmake, pipecutConfigVersion.cmake, pipecutTargets*.cmake
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed binaries find LibTorch where they were built against it: the
# torch wheel's lib directory (its own libraries find theirs through their
# RUNPATH). Every other dependency is a system library.
set(PIPECUT_TORCH_LIBRARY_DIR "${TORCH_INSTALL_PREFIX}/lib")
set_target_properties(pipecut pipecut-run pipecut_embed PROPERTIES INSTALL_RPATH "${PIPECUT_TORCH_LIBRARY_DIR}")

install(TARGETS pipecut pipecut-run pipecut_embed EXPORT pipecutTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The public headers keep their paths under include/pipecut (runtime/...,
# support/...), which is on the consumer's include path along with include/,
# so that they include each other as they do in the tree. Each is torch-free
# and includes only the standard library and the others listed here.
install(FILES lib/runtime/pipecut.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipecut)
install(FILES
  lib/runtime/cpu_matmul.h
  lib/runtime/inference.h
  lib/runtime/options.h
  lib/runtime/report.h
  lib/runtime/split_info.h
  lib/runtime/stage_format.h
  lib/runtime/transfer_probe.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipecut/runtime)
install(FILES lib/runtime/generate/generate.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipecut/runtime/generate)
install(FILES lib/runtime/train/train.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipecut/runtime/train)
install(FILES lib/support/error.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipecut/support)
install(FILES lib/weights/options.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipecut/weights)

set(_pipecut_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/pipecut)
install(EXPORT pipecutTargets NAMESPACE pipecut:: DESTINATION ${_pipecut_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/pipecutConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pipecutConfig.cmake INSTALL_DESTINATION ${_pipecut_cmake_dir})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pipecutConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pipecutConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/pipecutConfigVersion.cmake
  DESTINATION ${_pipecut_cmake_dir})
