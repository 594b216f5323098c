#include "bpf/kernel_symbol.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "bpf/programs.hpp"
#include "kernel_symbol.skel.h"

namespace pressured::bpf {

namespace {
struct SkelDeleter {
  void operator()(kernel_symbol* s) const { kernel_symbol__destroy(s); }
};
}  // namespace

Result<uint64_t> lookup_kernel_symbol(std::string_view name) {
  std::unique_ptr<kernel_symbol, SkelDeleter> skel(kernel_symbol__open());
  if (!skel) return Error::from_errno(errno, "open the kernel symbol lookup program");
  if (name.empty() || name.size() >= sizeof(skel->rodata->name) || name.find('\0') != std::string_view::npos)
    return Error{EINVAL, "kernel symbol name '" + std::string(name) + "': empty or longer than " +
                             std::to_string(sizeof(skel->rodata->name) - 1) + " bytes"};
  std::memcpy(skel->rodata->name, name.data(), name.size());
  skel->rodata->name_size = static_cast<uint32_t>(name.size() + 1);
  {
    MuteLibbpf mute;  // before 5.16 the refusal is expected
    if (int err = kernel_symbol__load(skel.get()); err != 0)
      return Error{ENOTSUP, std::string("no bpf_kallsyms_lookup_name (5.16+) or syscall programs (5.14+): load: ") +
                                std::strerror(-err)};
  }
  LIBBPF_OPTS(bpf_test_run_opts, run);
  if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.lookup_kernel_symbol), &run) != 0)
    return Error::from_errno(errno, "run the kernel symbol lookup program");
  if (run.retval != 0) return Error{EINVAL, "kernel symbol name '" + std::string(name) + "' refused by the program"};
  const int64_t err = skel->bss->err;
  if (err != 0) {
    const int e = err < 0 ? static_cast<int>(-err) : EIO;
    return Error::from_errno(e, "bpf_kallsyms_lookup_name(" + std::string(name) + ")");
  }
  return static_cast<uint64_t>(skel->bss->addr);
}

}  // namespace pressured::bpf
