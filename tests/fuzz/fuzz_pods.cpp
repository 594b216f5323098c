// Pod metadata from the kubelet (JSON) or local files (YAML): pods, or an
// error; bounded in depth, size and time on every input.
#include <cstdint>
#include <string_view>

#include "pods/pod_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)pressured::pods::parse_pod_documents(text, pressured::pods::DocumentFormat::Auto);
  (void)pressured::pods::parse_pod_documents(text, pressured::pods::DocumentFormat::Yaml);
  return 0;
}
