// Small file-system helpers: whole-file reads, pread/pwrite loops that survive short transfers
// and EINTR, directory listing, file stats. Errors come back as a message, never an exception.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace frost::util {

bool read_file(const std::string& path, std::string* out, std::string* error);
bool write_file(const std::string& path, const std::string& data, std::string* error);

// Reads exactly `bytes` at `offset`; a short file is an error naming the shortfall.
bool pread_full(int fd, void* dst, size_t bytes, uint64_t offset, std::string* error);
bool write_full(int fd, const void* src, size_t bytes, std::string* error);
// Writes exactly `bytes` at `offset` (pwrite: safe from several threads on one descriptor).
bool pwrite_full(int fd, const void* src, size_t bytes, uint64_t offset, std::string* error);

struct FileStat {
    uint64_t size = 0;
    int64_t mtime_ns = 0;  // modification time, nanoseconds since the epoch
    bool is_dir = false;
};
bool stat_file(const std::string& path, FileStat* out);
bool file_exists(const std::string& path);

// Names (not paths) of the entries in `dir`, sorted, without "." and "..".
bool list_dir(const std::string& dir, std::vector<std::string>* names, std::string* error);
bool make_dirs(const std::string& dir, std::string* error);  // mkdir -p
std::string join_path(const std::string& a, const std::string& b);

}  // namespace frost::util
