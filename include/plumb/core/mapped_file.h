// plumb::MappedFile: a read-only memory map of a whole file.
//
// Weights are read straight out of the page cache: SafetensorsFile::Open() maps the file once and hands out
// spans into the mapping, so opening a multi-gigabyte model costs no copy. The mapping is private and
// read-only (PROT_READ, MAP_PRIVATE); writing through data() is undefined. See docs/formats.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace plumb {

class MappedFile {
 public:
  // Maps the whole file at `path`. Throws plumb::Error naming the path and the system's reason (strerror)
  // if it cannot be opened, stat'ed or mapped, or is not a regular file. An empty file is valid: size() is
  // 0 and data() is nullptr (mmap of length 0 is not allowed, so nothing is mapped).
  static MappedFile Open(const std::string& path);

  MappedFile() = default;  // maps nothing: size() == 0, data() == nullptr, path() == ""
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::uint8_t* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Unmap() noexcept;

  std::string path_;
  const std::uint8_t* data_ = nullptr;  // start of the mapping, or nullptr when size_ == 0
  std::size_t size_ = 0;
};

}  // namespace plumb
