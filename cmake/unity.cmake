# pipecut_unity_groups(TARGET NAME FILE... [NAME FILE...]...)
#
# Compiles each NAME's files as one translation unit (CMake's unity build in
# GROUP mode); files of TARGET in no group compile alone. A name is any word
# not ending in .cpp. Why: see where lib/CMakeLists.txt calls it.
# Files in one group share a translation unit, so their file-local names
# (anonymous namespaces, statics) must not clash; a clash is a compile error,
# never a silent change of meaning, because two definitions of one name in one
# unit are ill-formed.
option(PIPECUT_UNITY "compile each group of files that share heavy headers as one unit (faster cold builds)" ON)

function(pipecut_unity_groups target)
  if(NOT PIPECUT_UNITY)
    return()
  endif()
  set(group "")
  foreach(arg IN LISTS ARGN)
    if(arg MATCHES "\\.cpp$")
      if(group STREQUAL "")
        message(FATAL_ERROR "pipecut_unity_groups(${target}): ${arg} comes before any group name")
      endif()
      set_source_files_properties(${arg} TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP "${target}_${group}")
    else()
      set(group "${arg}")
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()
