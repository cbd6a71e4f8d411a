# The parts of rapids-cmake's rapids-test module that RMM's cpp/tests/CMakeLists.txt calls, for
# building that file unchanged against our package (bindings-cpp/peer/CMakeLists.txt).
#
# rapids_test_add registers each test program as ONE ctest test, as RMM's rapids-cmake does (a process
# per GoogleTest case cost ~0.3 s each: ~6 minutes for RMM's ~1000 cases); a GoogleTest program writes
# its per-case results to ${RMM_PEER_GTEST_XML_DIR}/<NAME>.xml (--gtest_output), which
# scripts/peer/cpp_results.py counts (passed, failed, skipped), and its name goes into
# ${RMM_PEER_GTEST_PROGRAMS_FILE}. A program that is not a GoogleTest (PROCESS_IS_EXITING_SHUTDOWN_TEST)
# is checked by its exit status. GPUS/PERCENT (rapids-cmake's GPU scheduling) and installation are
# not needed here.

function(rapids_test_init)
endfunction()

function(rapids_cmake_support_conda_env target)
endfunction()

function(rapids_test_install_relocatable)
endfunction()

function(rapids_test_add)
  cmake_parse_arguments(_RT "" "NAME;GPUS;PERCENT;INSTALL_COMPONENT_SET" "COMMAND" ${ARGN})
  list(GET _RT_COMMAND 0 _target)
  if(NOT TARGET ${_target})
    message(FATAL_ERROR "rapids_test_add: ${_target} is not a target")
  endif()
  get_target_property(_excluded ${_target} EXCLUDE_FROM_ALL)
  if(_excluded)
    return()
  endif()
  if(_RT_NAME MATCHES "_PTDS_TEST$" AND NOT RMM_PEER_PTDS)
    # Built only with RMM_PEER_PTDS=ON (see bindings-cpp/peer/CMakeLists.txt).
    set_target_properties(${_target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    return()
  endif()
  get_target_property(_libs ${_target} LINK_LIBRARIES)
  if(_libs MATCHES "gtest")
    add_test(NAME ${_RT_NAME} COMMAND ${_RT_COMMAND} "--gtest_output=xml:${RMM_PEER_GTEST_XML_DIR}/${_RT_NAME}.xml")
    file(APPEND "${RMM_PEER_GTEST_PROGRAMS_FILE}" "${_RT_NAME}\n")
  else()
    add_test(NAME ${_RT_NAME} COMMAND ${_RT_COMMAND})
  endif()
endfunction()
