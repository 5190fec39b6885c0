// plumb::WriteFileBytes: the one place the library writes a whole file (the safetensors and GGUF writers).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace plumb {

// Writes `bytes` to `path`, replacing the file. Throws plumb::Error naming the path and the system's reason:
// "cannot create '<path>': ..." when it cannot be opened, "cannot write '<path>': ..." when a write or the
// close fails (a short write also says how many bytes were written).
void WriteFileBytes(const std::string& path, std::span<const std::uint8_t> bytes);

}  // namespace plumb
