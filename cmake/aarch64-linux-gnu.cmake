# Cross-compiling plumb for aarch64 Linux with Debian's g++-aarch64-linux-gnu (scripts/setup installs it):
#   cmake -S . -B build-aarch64 --toolchain cmake/aarch64-linux-gnu.cmake -DPLUMB_KERNELS_ONLY=ON
# Test programs run under qemu-user (Debian's qemu-user: qemu-aarch64), which CMake prepends to every
# add_test command of an executable target. `-L` points qemu at Debian's aarch64 runtime (the dynamic loader,
# libc and libstdc++ that the cross compiler links against), so the tests link dynamically, as on a real
# aarch64 machine, and need no sysroot of their own.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)  # GoogleTest's own CMake project enables C
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Headers and libraries only from the aarch64 runtime (never the host's x86-64 ones); programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(PLUMB_QEMU_AARCH64 qemu-aarch64)
if(PLUMB_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PLUMB_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
