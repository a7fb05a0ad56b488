#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace folio {

Expected<MappedFile> MappedFile::open(const std::string& path, const char* what) {
  const std::string prefix = std::string(what) + ": ";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(prefix + "cannot open '" + path + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return Status::error(prefix + "cannot stat '" + path + "': " + std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::error(prefix + "'" + path + "' is not a regular file");
  }
  const auto size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return Status::error(prefix + "'" + path + "' is empty");
  }
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (address == MAP_FAILED) return Status::error(prefix + "cannot map '" + path + "': " + std::strerror(map_error));
  // Weights are read front to back on load; asking for read-ahead is a hint, so failure is fine.
  ::madvise(address, size, MADV_WILLNEED);
  MappedFile file;
  file.address_ = address;
  file.size_ = size;
  file.path_ = path;
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : address_(std::exchange(other.address_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (address_ != nullptr) ::munmap(address_, size_);
    address_ = std::exchange(other.address_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (address_ != nullptr) ::munmap(address_, size_);
}

}  // namespace folio
