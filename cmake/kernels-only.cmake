# PLUMB_KERNELS_ONLY: the formats and kernel layers alone, with no OpenBLAS, OpenMP, JSON or Eigen, and the
# kernel tests that need nothing else. This is the aarch64 cross build (cmake/aarch64-linux-gnu.cmake), whose
# tests run under qemu-user; Debian has no cross-built OpenBLAS or JSON to link, and the kernels that differ
# between ISAs (the weight formats' row dots: src/kernels/ggml, fp8, int4) need none of them. Included by CMakeLists.txt, which stops after it.

# Every source of the kernel layer that is plain C++ (the ISA variants compile to nothing on other targets):
# the scalar definitions and every weight format's folder (src/kernels/<format>/).
# From formats/, every element format (a new one joins by itself, as docs/architecture.md's walkthrough
# expects) but the file containers, which read files and JSON.
file(GLOB PLUMB_KERNELS_ONLY_SOURCES CONFIGURE_DEPENDS
     src/formats/*.cpp src/kernels/isa.cpp
     src/kernels/*/*.cpp src/kernels/weight_format.cpp src/kernels/packed_dot.cpp src/kernels/kv_decode*.cpp
     src/kernels/weight_matrix.cpp src/kernels/int8_activations*.cpp)
list(FILTER PLUMB_KERNELS_ONLY_SOURCES EXCLUDE
     REGEX "/src/formats/(safetensors|gguf|gguf_metadata|gguf_writer)\\.cpp$")
add_library(plumb_kernels STATIC ${PLUMB_KERNELS_ONLY_SOURCES})
target_include_directories(plumb_kernels PUBLIC include)
target_link_libraries(plumb_kernels PRIVATE plumb_flags)

if(PLUMB_BUILD_TESTS)
  enable_testing()
  # GoogleTest from Debian's sources (package googletest, a dependency of libgtest-dev), compiled by this
  # build's compiler: Debian's libgtest.a is built for the host only.
  set(PLUMB_GOOGLETEST_SOURCE /usr/src/googletest CACHE PATH "GoogleTest sources for the kernels-only build")
  if(NOT EXISTS ${PLUMB_GOOGLETEST_SOURCE}/CMakeLists.txt)
    message(FATAL_ERROR "PLUMB_KERNELS_ONLY: no GoogleTest sources at ${PLUMB_GOOGLETEST_SOURCE} "
                        "(scripts/setup installs libgtest-dev, which brings them)")
  endif()
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${PLUMB_GOOGLETEST_SOURCE} googletest EXCLUDE_FROM_ALL SYSTEM)
  # GCC 12 warns (-Wrestrict, a known false positive) inside GoogleTest's own sources; they are not ours.
  target_compile_options(gtest PRIVATE -w)
  target_compile_options(gtest_main PRIVATE -w)

  if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
    message(WARNING "Cross-compiling with no CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64 not found?): "
                    "ctest will try to run the ${CMAKE_SYSTEM_PROCESSOR} test programs directly and fail")
  endif()

  # The kernel tests that use only the sources above; the *neon_test.cpp ones exist only on aarch64.
  set(PLUMB_KERNELS_ONLY_TESTS tests/kernels/row_dot_test.cpp tests/kernels/weight_format_test.cpp
                               tests/kernels/kv_decode_test.cpp tests/kernels/quantize_activations_test.cpp
                               tests/kernels/fma_dot_test.cpp tests/kernels/int8_gemm_test.cpp)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    file(GLOB PLUMB_NEON_TESTS CONFIGURE_DEPENDS tests/kernels/*neon_test.cpp)
    list(APPEND PLUMB_KERNELS_ONLY_TESTS ${PLUMB_NEON_TESTS})
  endif()
  foreach(test_source IN LISTS PLUMB_KERNELS_ONLY_TESTS)
    get_filename_component(test_name ${test_source} NAME_WE)
    add_executable(${test_name} ${test_source})
    target_include_directories(${test_name} PRIVATE tests)
    target_link_libraries(${test_name} PRIVATE plumb_kernels plumb_flags gtest gtest_main)
    # One CTest entry per program: listing each case would start qemu once per case at build and test time.
    add_test(NAME ${test_name} COMMAND ${test_name})
    set_tests_properties(${test_name} PROPERTIES LABELS kernels)
  endforeach()
endif()
