# One consumer test, as a script: cmake -DCASE=find_package|find_package_core|add_subdirectory|single_header
#   -DSOURCE_DIR=<llmsim> -DCONSUMER_DIR=<tests/consumer> -DWORK_DIR=<scratch> -DCXX=<compiler>
#   -DGENERATOR=<cmake generator> [-DMAKE_PROGRAM=<ninja/make>] -DVERSION=<llmsim version> -P consumer.cmake
# Every step starts from an empty WORK_DIR and stops the test with the step's full output on failure.
cmake_minimum_required(VERSION 3.22)
foreach(var IN ITEMS CASE SOURCE_DIR CONSUMER_DIR WORK_DIR CXX GENERATOR VERSION)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "consumer.cmake: -D${var}=... is required")
  endif()
endforeach()

# run(<what> <command>...): runs the command in WORK_DIR; its stdout is left in `run_output`.
function(run what)
  message(STATUS "consumer.${CASE}: ${what}")
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK_DIR}"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "consumer.${CASE}: ${what} failed (${result})\n  command: ${command}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# The options every nested configure shares: same compiler and generator as the calling build.
set(configure_args -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}")
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

if(CASE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run("configure llmsim for install" "${CMAKE_COMMAND}" ${configure_args} -S "${SOURCE_DIR}" -B "${WORK_DIR}/llmsim-build"
      -DLLMSIM_BUILD_TESTS=OFF -DLLMSIM_BUILD_EXAMPLES=OFF -DLLMSIM_BUILD_CLI=OFF -DLLMSIM_INSTALL=ON
      "-DCMAKE_INSTALL_PREFIX=${prefix}")
  run("install llmsim into ${prefix}" "${CMAKE_COMMAND}" --install "${WORK_DIR}/llmsim-build")
  foreach(file IN ITEMS include/llmsim/llmsim.hpp include/llmsim/json.hpp include/llmsim/single/llmsim.hpp
                        include/llmsim/single/json.hpp share/cmake/llmsim/llmsimConfig.cmake)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "consumer.find_package: the install has no ${file}")
    endif()
  endforeach()
  # Only the prefix may provide llmsim: no package registry, no other install.
  run("configure the consumer" "${CMAKE_COMMAND}" ${configure_args} -S "${CONSUMER_DIR}/find_package" -B "${WORK_DIR}/build"
      "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "-DLLMSIM_EXPECTED_VERSION=${VERSION}")
  file(STRINGS "${WORK_DIR}/build/CMakeCache.txt" found REGEX "^llmsim_DIR:")
  string(REGEX REPLACE "^llmsim_DIR:[A-Z]+=" "" found "${found}")
  if(NOT found STREQUAL "${prefix}/share/cmake/llmsim")
    message(FATAL_ERROR "consumer.find_package: llmsim was found in `${found}`, not in ${prefix}/share/cmake/llmsim")
  endif()
  run("build the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
  run("run the consumer" "${WORK_DIR}/build/consumer")

elseif(CASE STREQUAL "find_package_core")
  # A machine without nlohmann_json (hidden from every configure) installs and uses the core headers;
  # CMake 3.22's path (no header sets) is the one taken.
  set(prefix "${WORK_DIR}/prefix")
  set(no_json -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
  run("configure llmsim for install without nlohmann_json" "${CMAKE_COMMAND}" ${configure_args} -S "${SOURCE_DIR}"
      -B "${WORK_DIR}/llmsim-build" -DLLMSIM_BUILD_TESTS=OFF -DLLMSIM_BUILD_EXAMPLES=OFF -DLLMSIM_BUILD_CLI=OFF
      -DLLMSIM_INSTALL=ON -DLLMSIM_USE_FILE_SETS=OFF ${no_json} "-DCMAKE_INSTALL_PREFIX=${prefix}")
  run("install llmsim into ${prefix}" "${CMAKE_COMMAND}" --install "${WORK_DIR}/llmsim-build")
  foreach(file IN ITEMS include/llmsim/llmsim.hpp include/llmsim/cost/kernel_model.hpp
                        share/cmake/llmsim/llmsimConfig.cmake share/cmake/llmsim/llmsimTargets.cmake
                        share/doc/llmsim/LICENSE share/doc/llmsim/CHANGELOG.md)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "consumer.find_package_core: the install has no ${file}")
    endif()
  endforeach()
  if(EXISTS "${prefix}/share/cmake/llmsim/llmsimJsonTargets.cmake")
    message(FATAL_ERROR "consumer.find_package_core: llmsim::json was installed without nlohmann_json")
  endif()
  run("configure the consumer" "${CMAKE_COMMAND}" ${configure_args} -S "${CONSUMER_DIR}/find_package_core"
      -B "${WORK_DIR}/build" "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${no_json})
  run("build the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
  run("run the consumer" "${WORK_DIR}/build/consumer")

elseif(CASE STREQUAL "add_subdirectory")
  # The consumer's CMakeLists.txt refuses to configure when llmsim's tests, tools or install rules appear.
  run("configure the consumer" "${CMAKE_COMMAND}" ${configure_args} -S "${CONSUMER_DIR}/add_subdirectory" -B "${WORK_DIR}/build"
      "-DLLMSIM_SOURCE_DIR=${SOURCE_DIR}")
  run("list the consumer's tests" "${CMAKE_CTEST_COMMAND}" --test-dir "${WORK_DIR}/build" -N)
  if(NOT run_output MATCHES "Total Tests: 1\n")
    message(FATAL_ERROR "consumer.add_subdirectory: the consumer must see only its own test, ctest -N says:\n${run_output}")
  endif()
  run("build the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
  run("run the consumer" "${WORK_DIR}/build/consumer")

elseif(CASE STREQUAL "single_header")
  # What a user does with the copied folder: no CMake, one -I, nlohmann from the system.
  run("compile with ${CXX}" "${CXX}" -std=c++20 "-I${SOURCE_DIR}/single_include"
      "${CONSUMER_DIR}/single_header/main.cpp" -o "${WORK_DIR}/consumer")
  run("run the consumer" "${WORK_DIR}/consumer")

else()
  message(FATAL_ERROR "consumer.cmake: unknown CASE `${CASE}` (find_package, find_package_core, add_subdirectory or single_header)")
endif()
message(STATUS "consumer.${CASE}: ${run_output}")
