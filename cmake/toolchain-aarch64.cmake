# Cross-compiling pressured for arm64 (aarch64) with Debian's cross toolchain
# (gcc/g++-aarch64-linux-gnu) against the sysroot scripts/sysroot builds from
# Debian's arm64 -dev packages:
#
#   scripts/sysroot arm64
#   cmake -S . -B build/arm64 -G Ninja --toolchain cmake/toolchain-aarch64.cmake \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRESSURED_BUILD_BENCH=OFF
#
# PRESSURED_SYSROOT overrides the sysroot (default <source>/build/sysroot-arm64).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(PRESSURED_TARGET_ARCH arm64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT PRESSURED_SYSROOT)
  set(PRESSURED_SYSROOT ${CMAKE_CURRENT_LIST_DIR}/../build/sysroot-arm64)
endif()
get_filename_component(PRESSURED_SYSROOT ${PRESSURED_SYSROOT} ABSOLUTE)
if(NOT EXISTS ${PRESSURED_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig/libbpf.pc)
  message(FATAL_ERROR "No arm64 sysroot at ${PRESSURED_SYSROOT}: run scripts/sysroot arm64 (or set PRESSURED_SYSROOT)")
endif()
set(CMAKE_SYSROOT ${PRESSURED_SYSROOT})
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Try-compile projects re-read this file: hand them the sysroot too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PRESSURED_SYSROOT)

# Headers, libraries and CMake packages from the sysroot only; programs
# (bpftool, clang for the BPF objects) from this machine.
set(CMAKE_FIND_ROOT_PATH ${PRESSURED_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads only the sysroot's .pc files and prefixes their paths with it.
set(ENV{PKG_CONFIG_LIBDIR}
  "${PRESSURED_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${PRESSURED_SYSROOT}/usr/share/pkgconfig:${PRESSURED_SYSROOT}/usr/lib/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${PRESSURED_SYSROOT})
set(ENV{PKG_CONFIG_PATH} "")

