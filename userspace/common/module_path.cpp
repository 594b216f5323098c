#include "common/module_path.hpp"

#include <filesystem>
#include <system_error>

namespace pressured {

std::vector<std::string> module_search_paths(const std::string& file, const char* build_path) {
  std::vector<std::string> tries;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    tries.push_back((exe / file).string());
    tries.push_back((exe.parent_path() / "lib/pressured" / file).string());
  }
  if (build_path != nullptr) tries.emplace_back(build_path);
  return tries;
}

}  // namespace pressured
