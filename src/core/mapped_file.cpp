// Read-only mmap of a whole file (POSIX). See include/plumb/core/mapped_file.h.
#include "plumb/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// Closes a file descriptor when it goes out of scope (the mapping outlives the descriptor).
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

MappedFile MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw MakeError("cannot open '", path, "': ", std::strerror(err));
  }
  FdCloser closer(fd);

  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw MakeError("cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    throw MakeError("cannot map '", path, "': ", std::strerror(S_ISDIR(st.st_mode) ? EISDIR : EINVAL),
                    " (not a regular file)");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) {
    return MappedFile(path, nullptr, 0);  // mmap rejects length 0; an empty file maps to nothing
  }

  void* const addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) {
    const int err = errno;
    throw MakeError("cannot mmap '", path, "' (", size, " bytes): ", std::strerror(err));
  }
  return MappedFile(path, static_cast<const std::uint8_t*>(addr), size);
}

MappedFile::~MappedFile() {
  Unmap();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::Unmap() noexcept {
  if (data_ != nullptr) {
    // munmap only fails for arguments that did not come from mmap; nothing useful to do in a destructor.
    ::munmap(const_cast<std::uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }
}

}  // namespace plumb
