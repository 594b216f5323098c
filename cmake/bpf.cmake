# BPF build helpers, in the manner of libbpf-bootstrap's bpf_object().
#
# vmlinux.h comes from the build host's BTF (/sys/kernel/btf/vmlinux) unless
# PRESSURED_VMLINUX_H points at a file (for example a checked-in copy, or a
# header generated from another kernel's BTF).
set(PRESSURED_VMLINUX_H "" CACHE FILEPATH "Use this vmlinux.h instead of generating one from the host's BTF")
find_program(BPFTOOL bpftool PATHS /usr/sbin /sbin REQUIRED)
find_program(BPF_CLANG clang REQUIRED)

# The BPF objects are built for the architecture the daemon runs on: the
# bpf_tracing.h helpers (BPF_KPROBE, PT_REGS_*) read that architecture's
# registers, and vmlinux.h must describe that architecture's kernel.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(PRESSURED_BPF_ARCH arm64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(PRESSURED_BPF_ARCH x86)
else()
  message(FATAL_ERROR "No BPF target for processor ${CMAKE_SYSTEM_PROCESSOR} (x86_64 and aarch64 are known)")
endif()

set(PRESSURED_BPF_GEN ${CMAKE_BINARY_DIR}/bpf)
file(MAKE_DIRECTORY ${PRESSURED_BPF_GEN})

# PRESSURED_VMLINUX_DEP is what bpf_object() depends on: the file itself, or
# (when generated here) the target that generates it, because a custom
# command's output is only visible to rules in the directory that declares it.
if(PRESSURED_VMLINUX_H)
  set(PRESSURED_VMLINUX ${PRESSURED_VMLINUX_H})
  set(PRESSURED_VMLINUX_DEP ${PRESSURED_VMLINUX})
elseif(CMAKE_CROSSCOMPILING AND PRESSURED_BPF_ARCH STREQUAL "arm64")
  # This machine's BTF describes another architecture: take an arm64 kernel's
  # (scripts/vmlinux-btf arm64 extracts it from Debian's arm64 cloud kernel).
  set(PRESSURED_VMLINUX ${PRESSURED_BPF_GEN}/vmlinux.h)
  add_custom_command(OUTPUT ${PRESSURED_VMLINUX}
    COMMAND ${CMAKE_SOURCE_DIR}/scripts/vmlinux-btf arm64 ${PRESSURED_BPF_GEN}/vmlinux.btf
    COMMAND ${BPFTOOL} btf dump file ${PRESSURED_BPF_GEN}/vmlinux.btf format c > ${PRESSURED_VMLINUX}
    DEPENDS ${CMAKE_SOURCE_DIR}/scripts/vmlinux-btf
    COMMENT "Generating vmlinux.h from Debian's arm64 cloud kernel's BTF")
  add_custom_target(pressured_vmlinux_h DEPENDS ${PRESSURED_VMLINUX})
  set(PRESSURED_VMLINUX_DEP pressured_vmlinux_h)
elseif(CMAKE_CROSSCOMPILING)
  message(FATAL_ERROR "Cross-compiling for ${PRESSURED_BPF_ARCH}: set PRESSURED_VMLINUX_H to a vmlinux.h of a ${PRESSURED_BPF_ARCH} kernel")
elseif(EXISTS /sys/kernel/btf/vmlinux)
  set(PRESSURED_VMLINUX ${PRESSURED_BPF_GEN}/vmlinux.h)
  add_custom_command(OUTPUT ${PRESSURED_VMLINUX}
    COMMAND ${BPFTOOL} btf dump file /sys/kernel/btf/vmlinux format c > ${PRESSURED_VMLINUX}
    COMMENT "Generating vmlinux.h from the host's BTF")
  add_custom_target(pressured_vmlinux_h DEPENDS ${PRESSURED_VMLINUX})
  set(PRESSURED_VMLINUX_DEP pressured_vmlinux_h)
elseif(EXISTS ${CMAKE_SOURCE_DIR}/bpf/vmlinux/vmlinux.h)
  set(PRESSURED_VMLINUX ${CMAKE_SOURCE_DIR}/bpf/vmlinux/vmlinux.h)
  set(PRESSURED_VMLINUX_DEP ${PRESSURED_VMLINUX})
else()
  message(FATAL_ERROR "No BTF at /sys/kernel/btf/vmlinux: set PRESSURED_VMLINUX_H to a vmlinux.h (e.g. bpftool btf dump of another kernel)")
endif()

# bpf_object(NAME SRC): compiles bpf/<SRC> with clang -target bpf and generates
# <NAME>.skel.h with bpftool; the header is reachable through target <NAME>_skel.
function(bpf_object name src)
  set(obj ${PRESSURED_BPF_GEN}/${name}.bpf.o)
  set(skel ${PRESSURED_BPF_GEN}/${name}.skel.h)
  get_filename_component(vmlinux_dir ${PRESSURED_VMLINUX} DIRECTORY)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_${PRESSURED_BPF_ARCH}
            -Wall -Werror -Wno-unused-function
            # The object (its BTF and DWARF) is embedded in the binary: no
            # clone or build directory path in it, so builds are reproducible.
            -fdebug-prefix-map=${CMAKE_BINARY_DIR}=build -fdebug-prefix-map=${CMAKE_SOURCE_DIR}=.
            -I${vmlinux_dir} -I${CMAKE_SOURCE_DIR}/bpf -I${CMAKE_SOURCE_DIR}/include
            -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} ${CMAKE_SOURCE_DIR}/bpf/pressured_events.h ${PRESSURED_VMLINUX_DEP}
    IMPLICIT_DEPENDS C ${CMAKE_CURRENT_SOURCE_DIR}/${src}
    COMMENT "BPF ${src}")
  add_custom_command(OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}
    DEPENDS ${obj}
    COMMENT "Skeleton ${name}.skel.h")
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${PRESSURED_BPF_GEN})
endfunction()
