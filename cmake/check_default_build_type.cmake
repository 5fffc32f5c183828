# Configures llmsim (configure only, no build) into an empty WORK_DIR without a build type and
# checks that the cache says Release:
#   cmake -DSOURCE_DIR=<llmsim> -DWORK_DIR=<scratch> -DCXX=<compiler> -P check_default_build_type.cmake
# "Unix Makefiles" is single-config, the case the default applies to.
cmake_minimum_required(VERSION 3.22)
foreach(var IN ITEMS SOURCE_DIR WORK_DIR CXX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check_default_build_type.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
# CMake 3.22+ takes a default from the CMAKE_BUILD_TYPE environment variable: clear it.
execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=CMAKE_BUILD_TYPE "${CMAKE_COMMAND}" -G "Unix Makefiles" -S "${SOURCE_DIR}" -B "${WORK_DIR}" "-DCMAKE_CXX_COMPILER=${CXX}"
                        -DLLMSIM_BUILD_TESTS=OFF -DLLMSIM_BUILD_EXAMPLES=OFF
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "configuring ${SOURCE_DIR} into ${WORK_DIR} failed (${result})\n${out}\n${err}")
endif()
file(STRINGS "${WORK_DIR}/CMakeCache.txt" build_type REGEX "^CMAKE_BUILD_TYPE:")
if(NOT build_type STREQUAL "CMAKE_BUILD_TYPE:STRING=Release")
  message(FATAL_ERROR "a configure without a build type must default to Release; CMakeCache.txt has: \"${build_type}\"")
endif()
message(STATUS "CMakeCache.txt: ${build_type}")
file(REMOVE_RECURSE "${WORK_DIR}")
