#include "plumb/core/write_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "plumb/core/error.h"

namespace plumb {

void WriteFileBytes(const std::string& path, std::span<const std::uint8_t> bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    const int err = errno;
    throw MakeError("cannot create '", path, "': ", std::strerror(err));
  }
  const std::size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), file);
  const int write_err = errno;
  const bool closed = std::fclose(file) == 0;
  const int close_err = errno;
  if (written != bytes.size()) {
    throw MakeError("cannot write '", path, "': ", std::strerror(write_err), " (wrote ", written, " of ",
                    bytes.size(), " bytes)");
  }
  if (!closed) throw MakeError("cannot write '", path, "': ", std::strerror(close_err));
}

}  // namespace plumb
