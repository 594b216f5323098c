#include "bpf/kernel_btf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kernel/fd.hpp"
#include "kernel/file.hpp"

namespace pressured::bpf {

namespace {

constexpr uint16_t kMagic = 0xeB9F;

// Bytes that follow a type's common part (struct btf_type), by kind; -1 for a
// kind this reader does not know (a newer kernel's: the caller falls back).
long trailing_bytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case 1:  // INT
    case 14:  // VAR
    case 17:  // DECL_TAG
      return 4;
    case 2:   // PTR
    case 7:   // FWD
    case 8:   // TYPEDEF
    case 9:   // VOLATILE
    case 10:  // CONST
    case 11:  // RESTRICT
    case 12:  // FUNC
    case 16:  // FLOAT
    case 18:  // TYPE_TAG
      return 0;
    case 3:  // ARRAY
      return 12;
    case 4:   // STRUCT
    case 5:   // UNION
    case 15:  // DATASEC
    case 19:  // ENUM64
      return 12L * vlen;
    case 6:   // ENUM
    case 13:  // FUNC_PROTO
      return 8L * vlen;
    default:
      return -1;
  }
}

// Cheap and good enough to spread names over the table: the first and the
// last eight bytes and the length (the names that share a long prefix, like
// btf_trace_mm_vmscan_*, differ at their end). Collisions only lengthen a probe.
uint64_t name_hash(std::string_view s) {
  uint64_t head = 0, tail = 0;
  std::memcpy(&head, s.data(), std::min<std::size_t>(8, s.size()));
  if (s.size() > 8) std::memcpy(&tail, s.data() + s.size() - 8, 8);
  uint64_t h = (head * 0x9E3779B97F4A7C15ull) ^ ((tail + s.size()) * 0xC2B2AE3D27D4EB4Full);
  return h ^ (h >> 31);
}

}  // namespace

KernelBtf::~KernelBtf() {
  if (map_) ::munmap(map_, map_size_);
}

Result<std::unique_ptr<KernelBtf>> KernelBtf::open(const std::string& path, bool map) {
  auto fd = kernel::Fd::open(path, O_RDONLY);
  if (!fd) return fd.error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return Error::from_errno(errno, "fstat " + path);
  if (st.st_size <= 0 || st.st_size > (1L << 30))
    return Error{EINVAL, path + ": size " + std::to_string(st.st_size) + " is not a BTF's"};
  std::unique_ptr<KernelBtf> btf(new KernelBtf());
  const auto size = static_cast<std::size_t>(st.st_size);
  void* data = map ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd->get(), 0) : MAP_FAILED;
  if (data != MAP_FAILED) {
    btf->map_ = data;
    btf->map_size_ = size;
    btf->data_ = static_cast<const char*>(data);
  } else {
    // Before 6.16 the file cannot be mapped: read it into memory, on to the
    // end (a sysfs binary file gives at most a page a read).
    auto buf = kernel::read_to_end(*fd, path, 0, size);
    if (!buf) return buf.error();
    btf->copy_ = std::move(*buf);
    btf->data_ = btf->copy_.data();
    btf->map_size_ = btf->copy_.size();
  }
  auto ok = btf->index(path);
  if (!ok) return ok.error();
  return btf;
}

Result<std::unique_ptr<KernelBtf>> KernelBtf::from_bytes(std::string_view raw, std::string_view what) {
  std::unique_ptr<KernelBtf> btf(new KernelBtf());
  btf->copy_.assign(raw.data(), raw.size());
  btf->data_ = btf->copy_.data();
  btf->map_size_ = btf->copy_.size();
  auto ok = btf->index(what);
  if (!ok) return ok.error();
  return btf;
}

Result<void> KernelBtf::index(std::string_view what) {
  const std::size_t size = map_size_;
  auto bad = [&](const std::string& why) { return Error{EINVAL, std::string(what) + ": " + why}; };
  struct btf_header hdr {};
  if (size < sizeof(hdr)) return bad("shorter than a BTF header");
  std::memcpy(&hdr, data_, sizeof(hdr));
  if (hdr.magic != kMagic) return bad("not BTF of this byte order (magic)");
  if (hdr.hdr_len < sizeof(hdr) || hdr.hdr_len > size) return bad("header length out of range");
  const uint64_t types_at = uint64_t{hdr.hdr_len} + hdr.type_off;
  const uint64_t strings_at = uint64_t{hdr.hdr_len} + hdr.str_off;
  if (types_at + hdr.type_len > size || strings_at + hdr.str_len > size) return bad("a section runs past the end");
  if (hdr.str_len == 0 || data_[strings_at + hdr.str_len - 1] != '\0')
    return bad("the string section does not end in NUL");
  types_ = data_ + types_at;
  strings_ = data_ + strings_at;
  types_len_ = hdr.type_len;
  strings_len_ = hdr.str_len;

  // One walk: each type's offset, and the named ones counted for the table.
  offsets_.clear();
  offsets_.reserve(hdr.type_len / 16 + 1);
  offsets_.push_back(0);  // void
  std::size_t named = 0;
  for (uint32_t off = 0; off < types_len_;) {
    if (types_len_ - off < sizeof(struct btf_type)) return bad("a type runs past the type section");
    struct btf_type t {};
    std::memcpy(&t, types_ + off, sizeof(t));
    const long extra = trailing_bytes(BTF_INFO_KIND(t.info), BTF_INFO_VLEN(t.info));
    if (extra < 0) return bad("unknown BTF kind " + std::to_string(BTF_INFO_KIND(t.info)));
    if (t.name_off >= strings_len_) return bad("a name outside the string section");
    const uint64_t next = uint64_t{off} + sizeof(struct btf_type) + static_cast<uint64_t>(extra);
    if (next > types_len_) return bad("a type runs past the type section");
    offsets_.push_back(off);
    if (t.name_off != 0 && strings_[t.name_off] != '\0') ++named;
    off = static_cast<uint32_t>(next);
  }
  // Open addressing, at most half full; ids inserted in increasing order, so
  // the first match along a probe is the lowest id of that name.
  std::size_t cap = 1024;
  while (cap < named * 2) cap <<= 1;
  slots_.assign(cap, 0);
  const std::size_t mask = cap - 1;
  for (std::size_t id = 1; id < offsets_.size(); ++id) {
    std::string_view name = name_of(type(static_cast<int>(id)));
    if (name.empty()) continue;
    std::size_t i = name_hash(name) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = static_cast<uint32_t>(id);
  }
  return {};
}

std::string_view KernelBtf::name_of(const struct btf_type* t) const {
  if (!t || t->name_off == 0) return {};
  return std::string_view(strings_ + t->name_off);
}

const struct btf_type* KernelBtf::type(int id) const {
  if (id <= 0 || static_cast<std::size_t>(id) >= offsets_.size()) return nullptr;
  // The type section is 4-byte aligned in the kernel's BTF and in ours.
  return reinterpret_cast<const struct btf_type*>(types_ + offsets_[static_cast<std::size_t>(id)]);
}

int KernelBtf::find(std::string_view name, int kind) const {
  if (name.empty() || slots_.empty()) return 0;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = name_hash(name) & mask; slots_[i] != 0; i = (i + 1) & mask) {
    const auto* t = type(static_cast<int>(slots_[i]));
    if ((kind < 0 || BTF_INFO_KIND(t->info) == static_cast<uint32_t>(kind)) && name_of(t) == name)
      return static_cast<int>(slots_[i]);
  }
  return 0;
}

}  // namespace pressured::bpf
