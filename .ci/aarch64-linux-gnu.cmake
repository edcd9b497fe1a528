# Cross-building for arm64 on Debian/Ubuntu (multiarch): gcc-aarch64-linux-gnu
# (or clang --target, CC=clang) and the :arm64 -dev packages; .ci/arm64 uses it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(NOT DEFINED ENV{CC})
  set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
endif()
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
# pkg-config answers for the arm64 packages, not the host's
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# tests run under qemu user-mode emulation, with the arm64 loader and libraries
find_program(GLESLLM_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(GLESLLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GLESLLM_QEMU_AARCH64} -L /)
endif()
