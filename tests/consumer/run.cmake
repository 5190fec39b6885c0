# CTest install.consumer_finds_plumb (CMakeLists.txt): installs the plumb build in BUILD_DIR into a fresh
# prefix, then builds tests/consumer against that install twice, once through find_package(plumb) and once
# with pkg-config's flags, and runs both on the committed fixture suite.
# Arguments: BUILD_DIR, SOURCE_DIR, WORK_DIR, CXX, GENERATOR.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(JOIN " " command ${ARGN})
    message(FATAL_ERROR "failed (${rc}): ${command}\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file include/plumb/kernels/kernels.h lib/cmake/plumb/plumbConfig.cmake lib/pkgconfig/plumb.pc bin/plumb)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "the install has no ${file}")
  endif()
endforeach()

# find_package(plumb), from the install alone (CMAKE_PREFIX_PATH; nothing of the source or build tree).
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/cmake-build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer ${SOURCE_DIR}/fixtures/suite)

# pkg-config.
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
execute_process(COMMAND pkg-config --cflags --libs plumb RESULT_VARIABLE rc OUTPUT_VARIABLE flags
                ERROR_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs plumb: ${flags}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} -std=c++20 ${SOURCE_DIR}/tests/consumer/consumer.cpp -o ${WORK_DIR}/consumer-pc ${flags})
run(${WORK_DIR}/consumer-pc ${SOURCE_DIR}/fixtures/suite)
