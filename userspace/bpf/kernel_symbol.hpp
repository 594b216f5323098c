#pragma once
// Kernel symbol addresses without reading /proc/kallsyms.

#include <cstdint>
#include <string_view>

#include "pressured/result.hpp"

namespace pressured::bpf {

/// The address of a kernel symbol, as /proc/kallsyms would show it to this
/// process, asked of the kernel (bpf_kallsyms_lookup_name from a syscall
/// program, 5.16+) instead of read from kallsyms, whose 120k lines cost tens of
/// milliseconds of kernel time. Errors: ENOENT, not a symbol (data symbols need
/// CONFIG_KALLSYMS_ALL); EPERM, addresses hidden from this process
/// (kptr_restrict, CAP_SYSLOG); ENOTSUP, the kernel lacks the helper or syscall
/// programs; EINVAL, an empty or overlong name.
Result<uint64_t> lookup_kernel_symbol(std::string_view name);

}  // namespace pressured::bpf
