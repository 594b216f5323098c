#pragma once
// Whitespace trimming for text others write (a token file, an HTTP header
// value, a flag's statement): one definition of "whitespace", the C locale's
// isspace, so a trailing "\r\n" or tab is dropped the same way everywhere.
// Parsers of the kernel's and of HTTP's own formats keep their narrower sets.

#include <cctype>
#include <string_view>

namespace pressured {

/// `s` without leading and trailing space, \t, \n, \v, \f and \r.
inline std::string_view trim_space(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace pressured
