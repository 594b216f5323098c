// The checkpoint reader on a corrupt or hostile state file: a checkpoint or
// an error; what decodes encodes and decodes back.
#include <cstdint>
#include <string>

#include "daemon/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto cp = pressured::decode_checkpoint(text);
  if (cp) {
    if (!pressured::decode_checkpoint(pressured::encode_checkpoint(*cp))) __builtin_trap();
  }
  return 0;
}
