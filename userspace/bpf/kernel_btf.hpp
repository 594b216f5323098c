#pragma once
// The kernel's BTF for the attach choices: a name index over its raw bytes,
// mapped where the kernel allows it, instead of a libbpf parse of all of it.

#include <linux/btf.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/result.hpp"

namespace pressured::bpf {

/// Raw BTF (the format of /sys/kernel/btf/vmlinux) with an index from names to
/// type ids. The attach choices ask a few dozen names; libbpf's btf__new
/// copies and checks every type of a 5+ MiB BTF and then finds each name by a
/// linear search. This walks the types once, hashing their names, and keeps
/// no copy where the kernel lets the file be mapped (6.16+).
class KernelBtf {
 public:
  /// Maps `path` (read into memory where mapping is refused). Errors name the
  /// path: missing file, not BTF, a type this reader does not know.
  /// `map` false reads it even where it could be mapped (tests: the path of
  /// kernels before 6.16 on this one).
  static Result<std::unique_ptr<KernelBtf>> open(const std::string& path, bool map = true);
  /// From raw BTF bytes (copied): libbpf's fallback sources, tests.
  static Result<std::unique_ptr<KernelBtf>> from_bytes(std::string_view raw, std::string_view what);
  ~KernelBtf();
  KernelBtf(const KernelBtf&) = delete;
  KernelBtf& operator=(const KernelBtf&) = delete;

  /// The lowest id of a type named `name` and of `kind` (BTF_KIND_*; -1: any
  /// kind), as btf__find_by_name_kind finds it; 0 when there is none.
  int find(std::string_view name, int kind = -1) const;
  /// The type with this id; null when out of range (0, void, included).
  const struct btf_type* type(int id) const;
  /// Types, void included (ids run from 0 to type_count() - 1).
  std::size_t type_count() const { return offsets_.size(); }
  /// Whether the bytes are the kernel's own mapping (no copy held).
  bool mapped() const { return map_ != nullptr; }

 private:
  KernelBtf() = default;
  Result<void> index(std::string_view what);
  std::string_view name_of(const struct btf_type* t) const;

  void* map_ = nullptr;        // the mapping, when mapped
  std::size_t map_size_ = 0;
  std::string copy_;           // the bytes, when not mapped
  const char* data_ = nullptr;
  const char* types_ = nullptr;
  const char* strings_ = nullptr;
  uint32_t types_len_ = 0;
  uint32_t strings_len_ = 0;
  std::vector<uint32_t> offsets_;  // type id -> offset in the type section (id 0: void, unused)
  std::vector<uint32_t> slots_;    // open addressing on the name's hash: type ids, 0 empty
};

}  // namespace pressured::bpf
