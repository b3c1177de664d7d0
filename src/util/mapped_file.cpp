// mmap(PROT_READ, MAP_PRIVATE) of a whole file plus an fstat-based intactness check.
#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace frost::util {

MappedFile::~MappedFile() { close(); }

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        close();
        path_ = std::move(o.path_);
        fd_ = std::exchange(o.fd_, -1);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

bool MappedFile::open(const std::string& path, std::string* error) {
    close();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *error = "cannot open " + path + ": " + std::strerror(errno);
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *error = "not a regular file: " + path;
        ::close(fd);
        return false;
    }
    size_t size = size_t(st.st_size);
    const uint8_t* data = nullptr;
    if (size > 0) {
        void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            *error = "cannot mmap " + path + ": " + std::strerror(errno);
            ::close(fd);
            return false;
        }
        data = static_cast<const uint8_t*>(p);
    }
    path_ = path;
    fd_ = fd;
    data_ = data;
    size_ = size;
    return true;
}

void MappedFile::close() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
    data_ = nullptr;
    fd_ = -1;
    size_ = 0;
}

bool MappedFile::still_intact(uint64_t* current_size) const {
    if (fd_ < 0) return false;
    struct stat st;
    if (fstat(fd_, &st) != 0) return false;
    if (current_size) *current_size = uint64_t(st.st_size);
    return uint64_t(st.st_size) >= size_;
}

}  // namespace frost::util
