// The checkpoint on a corrupt or hostile state file, through every reader of
// it: the decoder (a checkpoint or an error; what decodes encodes and decodes
// back), the daemon's load from disk through the safe writer and reader
// (kernel/safe_file.hpp: the same answer as the decoder on the same bytes),
// and `pressured uninstall`'s recognisers (never a document built: what the
// daemon writes is always recognised, whole or cut short).
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "daemon/checkpoint.hpp"
#include "daemon/uninstall.hpp"

namespace {

const std::string& state_path() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/pressured-fuzz-checkpoint-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (dir == nullptr) __builtin_trap();
    static const std::string made = dir;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    return made + "/state/state.json";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto cp = pressured::decode_checkpoint(text);
  if (cp) {
    const std::string again = pressured::encode_checkpoint(*cp);
    if (!pressured::decode_checkpoint(again)) __builtin_trap();
    // What the daemon writes, uninstall recognises; and any piece of it a
    // crash mid-write leaves beside it.
    if (!pressured::looks_like_checkpoint(again)) __builtin_trap();
    if (!pressured::looks_like_checkpoint_temporary(again.substr(0, size % (again.size() + 1)))) __builtin_trap();
  }
  (void)pressured::looks_like_checkpoint(text);
  (void)pressured::looks_like_checkpoint_temporary(text);

  // The bytes on disk, written and loaded as the daemon does: the load
  // answers as the decoder does (restored exactly when it decodes).
  const std::string& path = state_path();
  if (!pressured::write_file_atomically(path, text)) __builtin_trap();
  const pressured::LoadedCheckpoint loaded = pressured::load_checkpoint(path, cp ? cp->boot_id : "fuzz-boot");
  const bool restored = loaded.status == pressured::CheckpointLoad::Restored;
  if (restored != static_cast<bool>(cp)) __builtin_trap();
  if (restored && pressured::encode_checkpoint(loaded.checkpoint) != pressured::encode_checkpoint(*cp)) {
    __builtin_trap();
  }
  if (!cp && loaded.status != pressured::CheckpointLoad::Corrupt) __builtin_trap();
  return 0;
}
