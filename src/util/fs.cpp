// POSIX implementations of the fs.h helpers.
#include "util/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace frost::util {

std::string join_path(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (a.back() == '/') return a + b;
    return a + "/" + b;
}

bool pwrite_full(int fd, const void* src, size_t bytes, uint64_t offset, std::string* error) {
    const uint8_t* p = static_cast<const uint8_t*>(src);
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = ::pwrite(fd, p + done, bytes - done, off_t(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            *error = std::string("write failed: ") + std::strerror(errno);
            return false;
        }
        done += size_t(n);
    }
    return true;
}

bool pread_full(int fd, void* dst, size_t bytes, uint64_t offset, std::string* error) {
    uint8_t* p = static_cast<uint8_t*>(dst);
    size_t done = 0;
    while (done < bytes) {
        ssize_t n = ::pread(fd, p + done, bytes - done, off_t(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            *error = std::string("read failed: ") + std::strerror(errno);
            return false;
        }
        if (n == 0) {
            *error = "unexpected end of file: wanted " + std::to_string(bytes) + " bytes at offset " +
                     std::to_string(offset) + ", got " + std::to_string(done) + " (file truncated?)";
            return false;
        }
        done += size_t(n);
    }
    return true;
}

bool write_full(int fd, const void* src, size_t bytes, std::string* error) {
    const uint8_t* p = static_cast<const uint8_t*>(src);
    while (bytes > 0) {
        ssize_t n = ::write(fd, p, bytes);
        if (n < 0) {
            if (errno == EINTR) continue;
            *error = std::string("write failed: ") + std::strerror(errno);
            return false;
        }
        p += n;
        bytes -= size_t(n);
    }
    return true;
}

bool read_file(const std::string& path, std::string* out, std::string* error) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *error = "cannot open " + path + ": " + std::strerror(errno);
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *error = "cannot stat " + path + ": " + std::strerror(errno);
        ::close(fd);
        return false;
    }
    out->assign(size_t(st.st_size), '\0');
    bool ok = pread_full(fd, out->data(), out->size(), 0, error);
    ::close(fd);
    if (!ok) *error = path + ": " + *error;
    return ok;
}

bool write_file(const std::string& path, const std::string& data, std::string* error) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *error = "cannot create " + path + ": " + std::strerror(errno);
        return false;
    }
    bool ok = write_full(fd, data.data(), data.size(), error);
    if (::close(fd) != 0 && ok) {
        *error = "close failed for " + path + ": " + std::strerror(errno);
        ok = false;
    }
    return ok;
}

bool stat_file(const std::string& path, FileStat* out) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;
    out->size = uint64_t(st.st_size);
    out->mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    out->is_dir = S_ISDIR(st.st_mode);
    return true;
}

bool file_exists(const std::string& path) {
    FileStat s;
    return stat_file(path, &s);
}

bool list_dir(const std::string& dir, std::vector<std::string>* names, std::string* error) {
    DIR* d = opendir(dir.c_str());
    if (!d) {
        *error = "cannot list " + dir + ": " + std::strerror(errno);
        return false;
    }
    names->clear();
    while (struct dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names->push_back(n);
    }
    closedir(d);
    std::sort(names->begin(), names->end());
    return true;
}

bool make_dirs(const std::string& dir, std::string* error) {
    if (dir.empty()) return true;
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = dir.find('/', pos + 1);
        partial = dir.substr(0, pos);
        if (partial.empty()) continue;
        if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
            *error = "cannot create directory " + partial + ": " + std::strerror(errno);
            return false;
        }
    }
    return true;
}

}  // namespace frost::util
