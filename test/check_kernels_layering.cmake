# kernels/ is the bottom layer: the CUDA kernels and, in kernels/base/, the
# base headers (checks, RNG, config reading) that policy/, tools/, plugin/ and
# envs/ build on. An include from kernels/ into one of those folders makes a
# cycle (kernels -> tools -> kernels); an include from kernels/base/ into the
# rest of kernels/ would drag the kernels' headers into every layer. So this
# script fails, naming file:line, on either kind of include.
# Run as `cmake -DMAMBARL_SOURCE_DIR=<repo> -P check_kernels_layering.cmake`.
cmake_minimum_required(VERSION 3.24)

if(NOT IS_DIRECTORY "${MAMBARL_SOURCE_DIR}/kernels/base")
  message(FATAL_ERROR "MAMBARL_SOURCE_DIR='${MAMBARL_SOURCE_DIR}' has no kernels/base/ folder")
endif()

# "policy/x.hpp", <tools/x.hpp> and "../plugin/x.hpp" alike.
set(upward_include [[^[ 	]*#[ 	]*include[ 	]*["<](\.\./)*(policy|tools|plugin|envs)/]])
# From kernels/base/: "kernels/x.cuh" or any "../x" (the folder above it).
set(kernels_include [[^[ 	]*#[ 	]*include[ 	]*["<](\.\./|kernels/)]])
set(base_include [[^[ 	]*#[ 	]*include[ 	]*["<]kernels/base/]])

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${MAMBARL_SOURCE_DIR}"
     "${MAMBARL_SOURCE_DIR}/kernels/*")
if(NOT files)
  message(FATAL_ERROR "no files found under ${MAMBARL_SOURCE_DIR}/kernels")
endif()

set(upward "")
set(from_base "")
set(base_count 0)
foreach(file IN LISTS files)
  set(in_base OFF)
  if(file MATCHES "^kernels/base/")
    set(in_base ON)
    math(EXPR base_count "${base_count} + 1")
  endif()
  # One list element per line, so the index is the line number. A CMake list
  # splits at ';', treats '[' ']' as grouping and '\' as an escape, none of
  # which an include line holds: replaced first, so no C++ line can merge
  # lines or hide an include from the check.
  file(READ "${MAMBARL_SOURCE_DIR}/${file}" text)
  string(REGEX REPLACE "[][;\\]" "_" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(line_no 0)
  foreach(line IN LISTS lines)
    math(EXPR line_no "${line_no} + 1")
    if(line MATCHES "${upward_include}")
      string(APPEND upward "\n  ${file}:${line_no}: ${line}")
    elseif(in_base AND line MATCHES "${kernels_include}" AND NOT line MATCHES "${base_include}")
      string(APPEND from_base "\n  ${file}:${line_no}: ${line}")
    endif()
  endforeach()
endforeach()

set(failures "")
if(upward)
  string(APPEND failures "kernels/ must include nothing from policy/, tools/, plugin/ or envs/ "
                         "(move what it needs down into kernels/):${upward}\n")
endif()
if(from_base)
  string(APPEND failures "kernels/base/ must include nothing from the rest of kernels/ "
                         "(it is the base every layer includes; move what it needs into kernels/base/):${from_base}\n")
endif()
if(failures)
  message(FATAL_ERROR "${failures}")
endif()
list(LENGTH files count)
message(STATUS "kernels/ layering: ${count} files (${base_count} in kernels/base/), no upward include")
