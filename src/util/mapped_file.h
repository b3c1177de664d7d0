// Read-only memory mapping of a whole file. The size is taken at open; because touching a page
// past the end of a file that shrank after open raises SIGBUS, callers check still_intact()
// (which re-stats the open descriptor) before reading through the mapping, and bulk readers use
// pread on fd() instead, where a shrunk file shows up as a short read (reliability T06).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace frost::util {

class MappedFile {
public:
    MappedFile() = default;
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;

    // Opens and maps `path`. An empty file opens with data() == nullptr and size() == 0.
    // On failure returns false and writes the reason (with errno text) to *error.
    bool open(const std::string& path, std::string* error);
    void close();

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    bool is_open() const { return fd_ >= 0; }

    // True if the file still has at least the size it had at open (so every mapped byte is
    // backed). Writes the current size to *current_size when non-null.
    bool still_intact(uint64_t* current_size = nullptr) const;

private:
    std::string path_;
    int fd_ = -1;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace frost::util
