# kernels/ is the bottom layer: the CUDA kernels and the base headers that
# policy/, tools/, plugin/ and envs/ build on. An include from kernels/ into
# one of those folders makes a cycle (kernels -> tools -> kernels), so this
# script fails, naming file:line, on any such include in any file under
# kernels/. Run as `cmake -DMAMBARL_SOURCE_DIR=<repo> -P check_kernels_layering.cmake`.
cmake_minimum_required(VERSION 3.24)

if(NOT IS_DIRECTORY "${MAMBARL_SOURCE_DIR}/kernels")
  message(FATAL_ERROR "MAMBARL_SOURCE_DIR='${MAMBARL_SOURCE_DIR}' has no kernels/ folder")
endif()

# "policy/x.hpp", <tools/x.hpp> and "../plugin/x.hpp" alike.
set(upward_include [[^[ 	]*#[ 	]*include[ 	]*["<](\.\./)*(policy|tools|plugin|envs)/]])

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${MAMBARL_SOURCE_DIR}"
     "${MAMBARL_SOURCE_DIR}/kernels/*")
if(NOT files)
  message(FATAL_ERROR "no files found under ${MAMBARL_SOURCE_DIR}/kernels")
endif()

set(violations "")
foreach(file IN LISTS files)
  # One list element per line, empty lines kept, so the index is the line number.
  file(STRINGS "${MAMBARL_SOURCE_DIR}/${file}" lines ENCODING UTF-8)
  set(line_no 0)
  foreach(line IN LISTS lines)
    math(EXPR line_no "${line_no} + 1")
    if(line MATCHES "${upward_include}")
      string(APPEND violations "\n  ${file}:${line_no}: ${line}")
    endif()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "kernels/ must include nothing from policy/, tools/, plugin/ or envs/ "
                      "(move what it needs down into kernels/):${violations}")
endif()
list(LENGTH files count)
message(STATUS "kernels/ layering: ${count} files, no upward include")
