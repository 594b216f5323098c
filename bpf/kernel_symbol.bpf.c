// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The address of one kernel symbol, asked of the kernel instead of read from
 * /proc/kallsyms: userspace loads this program, runs it once with
 * BPF_PROG_TEST_RUN and reads the answer from .bss (userspace/bpf/kernel_symbol.cpp).
 *
 * bpf_kallsyms_lookup_name() and BPF_PROG_TYPE_SYSCALL programs arrived in
 * 5.16 and 5.14; where either is missing the load fails and the caller does
 * without the symbol. The helper sees what /proc/kallsyms shows the caller
 * (kallsyms_show_value: kptr_restrict, CAP_SYSLOG) and, like it, data symbols
 * only with CONFIG_KALLSYMS_ALL. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* Set by userspace before load: the name and its size with the NUL. */
const volatile char name[64] = {};
const volatile __u32 name_size = 0;

/* The answer: the helper's return value (0, or -ENOENT, -EPERM, ...) and,
 * when it is 0, the address. */
__u64 addr = 0;
__s64 err = 0;

SEC("syscall")
int lookup_kernel_symbol(void *ctx)
{
	__u32 n = name_size;

	if (n < 2 || n > sizeof(name))
		return 1;
	err = bpf_kallsyms_lookup_name((const char *)name, n, 0, &addr);
	return 0;
}
