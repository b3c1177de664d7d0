// A file-system shim for the crash-point and power-loss tests (design/reliability.md T18, T19),
// loaded into `frost serve` with LD_PRELOAD; never part of frost itself.
//
// Below one directory (FROST_FS_SHIM_ROOT) it numbers every mutating call: an open that may
// write, write, pwrite, ftruncate, fsync, fdatasync, rename, link, unlink, mkdir, rmdir. When the
// count reaches FROST_FS_SHIM_CRASH_AT the process SIGKILLs itself *before* that call runs, so a
// sweep over N = 1, 2, ... stops the server in front of every write point it has.
//
// It also appends a journal (FROST_FS_SHIM_LOG), one tab-separated line per call that succeeded,
// from which tests/python/serve/powerloss.py replays a power cut: data written since a file's
// last fsync, and directory entries changed since their directory's last fsync, may be lost.
// To undo a rename over a file or an unlink, the shim first hard-links the old file into
// FROST_FS_SHIM_SAVE (outside the root), so the replay has its pre-image.
//
// Journal lines (inode numbers identify files across renames):
//   create <ino> <path>            open(O_CREAT) made a new file
//   write  <ino> <offset> <bytes>  data written (write, pwrite)
//   trunc  <ino> <length>          O_TRUNC or ftruncate
//   fsync  <ino>                   a regular file's data is durable
//   dsync  <dir>                   a directory's entries are durable
//   rename <ino> <from> <to> <saved|->   <saved>: the file <to> named before, kept in SAVE
//   link   <ino> <to>
//   unlink <ino> <path> <saved|->
//   mkdir  <path>  /  rmdir <path>
//   crash  <n> <call> <path>       the SIGKILL
#undef _FORTIFY_SOURCE  // open() must be a plain function here, not glibc's inline wrapper
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kMaxFd = 1024;      // descriptors above this are not followed (frost opens few)
constexpr int kPathBytes = 1024;  // longest path followed

struct Tracked {
    bool on = false;        // a descriptor of a path below the root
    bool dir = false;       // opened with O_DIRECTORY: its fsync makes entries durable
    bool append = false;    // O_APPEND: writes land at the end
    ino_t ino = 0;
    char path[kPathBytes] = {};
};

struct Shim {
    char root[kPathBytes] = {};
    size_t root_len = 0;
    char save[kPathBytes] = {};
    int log_fd = -1;
    unsigned long crash_at = 0;  // 0: never
    std::atomic<unsigned long> calls{0};
    std::atomic<unsigned long> saved{0};
    Tracked fds[kMaxFd];
};

Shim g;

template <class F>
F real(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

using open_fn = int (*)(const char*, int, ...);
using openat_fn = int (*)(int, const char*, int, ...);
using write_fn = ssize_t (*)(int, const void*, size_t);
using pwrite_fn = ssize_t (*)(int, const void*, size_t, off_t);
using trunc_fn = int (*)(int, off_t);
using fd_fn = int (*)(int);
using rename_fn = int (*)(const char*, const char*);
using renameat_fn = int (*)(int, const char*, int, const char*);
using renameat2_fn = int (*)(int, const char*, int, const char*, unsigned);
using path_fn = int (*)(const char*);
using unlinkat_fn = int (*)(int, const char*, int);
using mkdir_fn = int (*)(const char*, mode_t);
using mkdirat_fn = int (*)(int, const char*, mode_t);
using link_fn = int (*)(const char*, const char*);
using linkat_fn = int (*)(int, const char*, int, const char*, int);

__attribute__((constructor)) void init() {
    const char* root = std::getenv("FROST_FS_SHIM_ROOT");
    const char* log = std::getenv("FROST_FS_SHIM_LOG");
    const char* save = std::getenv("FROST_FS_SHIM_SAVE");
    const char* crash = std::getenv("FROST_FS_SHIM_CRASH_AT");
    if (!root || root[0] != '/' || std::strlen(root) + 1 >= sizeof g.root) return;
    std::snprintf(g.root, sizeof g.root, "%s", root);
    g.root_len = std::strlen(g.root);
    while (g.root_len > 1 && g.root[g.root_len - 1] == '/') g.root[--g.root_len] = '\0';
    if (save) std::snprintf(g.save, sizeof g.save, "%s", save);
    if (crash) g.crash_at = std::strtoul(crash, nullptr, 10);
    if (log) g.log_fd = real<open_fn>("open")(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

void journal(const char* fmt, ...) {
    if (g.log_fd < 0) return;
    char line[3 * kPathBytes + 128];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && size_t(n) < sizeof line) (void)real<write_fn>("write")(g.log_fd, line, size_t(n));  // O_APPEND: one line, whole
}

// `path` relative to `dirfd` as an absolute path (no "." or ".." folding: frost joins plain names).
bool absolute(int dirfd, const char* path, char* out) {
    if (!path) return false;
    if (path[0] == '/') return std::snprintf(out, kPathBytes, "%s", path) < kPathBytes;
    char base[kPathBytes];
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base)) return false;
    } else {
        char link[64];
        std::snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        const ssize_t n = readlink(link, base, sizeof base - 1);
        if (n <= 0) return false;
        base[n] = '\0';
    }
    return std::snprintf(out, kPathBytes, "%s/%s", base, path) < kPathBytes;
}

bool below_root(const char* abs) {
    return g.root_len && std::strncmp(abs, g.root, g.root_len) == 0 && (abs[g.root_len] == '/' || abs[g.root_len] == '\0');
}

// One write point: counted, and the process dies here when it is the chosen one.
void point(const char* call, const char* path) {
    const unsigned long n = g.calls.fetch_add(1) + 1;
    if (g.crash_at && n == g.crash_at) {
        journal("crash\t%lu\t%s\t%s\n", n, call, path);
        kill(getpid(), SIGKILL);
        for (;;) pause();
    }
}

Tracked* tracked(int fd) {
    return fd >= 0 && fd < kMaxFd && g.fds[fd].on ? &g.fds[fd] : nullptr;
}

// Keeps the file `abs` names under SAVE (a hard link) before a rename or unlink replaces it.
bool keep_pre_image(const char* abs, char* saved) {
    std::snprintf(saved, kPathBytes, "-");
    struct stat st;
    if (!g.save[0] || lstat(abs, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    char to[kPathBytes];
    const int n = std::snprintf(to, sizeof to, "%s/pre.%d.%lu", g.save, int(getpid()), g.saved.fetch_add(1));
    if (n <= 0 || size_t(n) >= sizeof to || real<link_fn>("link")(abs, to) != 0) return false;
    std::snprintf(saved, kPathBytes, "%s", to);
    return true;
}

ino_t inode_of(const char* abs) {
    struct stat st;
    return lstat(abs, &st) == 0 ? st.st_ino : 0;
}

int do_open(int dirfd, const char* path, int flags, mode_t mode) {
    static const openat_fn real_openat = real<openat_fn>("openat");
    char abs[kPathBytes];
    if (!absolute(dirfd, path, abs) || !below_root(abs)) return real_openat(dirfd, path, flags, mode);
    const bool writes = (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0;
    struct stat before;
    const bool existed = lstat(abs, &before) == 0;
    if (writes) point("open", abs);
    const int fd = real_openat(dirfd, path, flags, mode);
    if (fd < 0) return fd;
    const int saved_errno = errno;
    struct stat st;
    if (fd < kMaxFd && fstat(fd, &st) == 0) {
        Tracked& t = g.fds[fd];
        t.dir = S_ISDIR(st.st_mode);
        t.append = (flags & O_APPEND) != 0;
        t.ino = st.st_ino;
        std::snprintf(t.path, sizeof t.path, "%s", abs);
        t.on = true;
        if ((flags & O_CREAT) && !existed) journal("create\t%lu\t%s\n", (unsigned long)st.st_ino, abs);
        if ((flags & O_TRUNC) && existed && before.st_size > 0) journal("trunc\t%lu\t0\n", (unsigned long)st.st_ino);
    }
    errno = saved_errno;
    return fd;
}

mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode_t(va_arg(ap, int)) : 0;
}

ssize_t do_write(int fd, const void* buf, size_t n, off_t at, bool positioned) {
    static const write_fn real_write = real<write_fn>("write");
    static const pwrite_fn real_pwrite = real<pwrite_fn>("pwrite");
    Tracked* t = tracked(fd);
    if (!t) return positioned ? real_pwrite(fd, buf, n, at) : real_write(fd, buf, n);
    point(positioned ? "pwrite" : "write", t->path);
    off_t off = at;
    if (!positioned) {
        struct stat st;
        off = t->append ? (fstat(fd, &st) == 0 ? st.st_size : 0) : lseek(fd, 0, SEEK_CUR);
    }
    const ssize_t r = positioned ? real_pwrite(fd, buf, n, at) : real_write(fd, buf, n);
    if (r > 0) {
        const int e = errno;
        journal("write\t%lu\t%lld\t%lld\n", (unsigned long)t->ino, (long long)off, (long long)r);
        errno = e;
    }
    return r;
}

int do_sync(int fd, const char* name) {
    const fd_fn f = real<fd_fn>(name);
    Tracked* t = tracked(fd);
    if (!t) return f(fd);
    point(name, t->path);
    const int r = f(fd);
    if (r == 0) {
        if (t->dir) journal("dsync\t%s\n", t->path);
        else journal("fsync\t%lu\n", (unsigned long)t->ino);
    }
    return r;
}

int do_rename(int fd1, const char* from, int fd2, const char* to, unsigned flags) {
    static const renameat2_fn real_renameat2 = real<renameat2_fn>("renameat2");
    static const renameat_fn real_renameat = real<renameat_fn>("renameat");
    auto call = [&] { return flags ? real_renameat2(fd1, from, fd2, to, flags) : real_renameat(fd1, from, fd2, to); };
    char a[kPathBytes], b[kPathBytes];
    if (!absolute(fd1, from, a) || !absolute(fd2, to, b) || (!below_root(a) && !below_root(b))) return call();
    point("rename", b);
    const ino_t ino = inode_of(a);
    char saved[kPathBytes];
    const bool kept = keep_pre_image(b, saved);
    const int r = call();
    const int e = errno;
    if (r == 0) journal("rename\t%lu\t%s\t%s\t%s\n", (unsigned long)ino, a, b, saved);
    else if (kept) unlink(saved);
    errno = e;
    return r;
}

int do_unlink(int dirfd, const char* path, int flags) {
    static const unlinkat_fn real_unlinkat = real<unlinkat_fn>("unlinkat");
    char abs[kPathBytes];
    if (!absolute(dirfd, path, abs) || !below_root(abs)) return real_unlinkat(dirfd, path, flags);
    point((flags & AT_REMOVEDIR) ? "rmdir" : "unlink", abs);
    if (flags & AT_REMOVEDIR) {
        const int r = real_unlinkat(dirfd, path, flags);
        if (r == 0) journal("rmdir\t%s\n", abs);
        return r;
    }
    const ino_t ino = inode_of(abs);
    char saved[kPathBytes];
    const bool kept = keep_pre_image(abs, saved);
    const int r = real_unlinkat(dirfd, path, flags);
    const int e = errno;
    if (r == 0) journal("unlink\t%lu\t%s\t%s\n", (unsigned long)ino, abs, saved);
    else if (kept) real_unlinkat(AT_FDCWD, saved, 0);
    errno = e;
    return r;
}

int do_mkdir(int dirfd, const char* path, mode_t mode) {
    static const mkdirat_fn real_mkdirat = real<mkdirat_fn>("mkdirat");
    char abs[kPathBytes];
    if (!absolute(dirfd, path, abs) || !below_root(abs)) return real_mkdirat(dirfd, path, mode);
    point("mkdir", abs);
    const int r = real_mkdirat(dirfd, path, mode);
    if (r == 0) journal("mkdir\t%s\n", abs);
    return r;
}

int do_link(int fd1, const char* from, int fd2, const char* to, int flags) {
    static const linkat_fn real_linkat = real<linkat_fn>("linkat");
    char b[kPathBytes];
    if (!absolute(fd2, to, b) || !below_root(b)) return real_linkat(fd1, from, fd2, to, flags);
    point("link", b);
    const int r = real_linkat(fd1, from, fd2, to, flags);
    if (r == 0) {
        const int e = errno;
        journal("link\t%lu\t%s\n", (unsigned long)inode_of(b), b);
        errno = e;
    }
    return r;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(AT_FDCWD, path, flags, mode);
}
int open64(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(dirfd, path, flags, mode);
}
// What a _FORTIFY_SOURCE build of the caller calls when the flags are not a constant.
int __open_2(const char* path, int flags) { return do_open(AT_FDCWD, path, flags, 0); }
int __open64_2(const char* path, int flags) { return do_open(AT_FDCWD, path, flags, 0); }

ssize_t write(int fd, const void* buf, size_t n) { return do_write(fd, buf, n, 0, false); }
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) { return do_write(fd, buf, n, off, true); }
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) { return do_write(fd, buf, n, off, true); }

int ftruncate(int fd, off_t length) {
    static const trunc_fn real_ftruncate = real<trunc_fn>("ftruncate");
    Tracked* t = tracked(fd);
    if (!t) return real_ftruncate(fd, length);
    point("ftruncate", t->path);
    const int r = real_ftruncate(fd, length);
    if (r == 0) journal("trunc\t%lu\t%lld\n", (unsigned long)t->ino, (long long)length);
    return r;
}
int ftruncate64(int fd, off_t length) { return ftruncate(fd, length); }

int fsync(int fd) { return do_sync(fd, "fsync"); }
int fdatasync(int fd) { return do_sync(fd, "fdatasync"); }

int close(int fd) {
    static const fd_fn real_close = real<fd_fn>("close");
    if (fd >= 0 && fd < kMaxFd) g.fds[fd].on = false;
    return real_close(fd);
}

int rename(const char* from, const char* to) { return do_rename(AT_FDCWD, from, AT_FDCWD, to, 0); }
int renameat(int fd1, const char* from, int fd2, const char* to) { return do_rename(fd1, from, fd2, to, 0); }
int renameat2(int fd1, const char* from, int fd2, const char* to, unsigned flags) {
    return do_rename(fd1, from, fd2, to, flags);
}

int unlink(const char* path) { return do_unlink(AT_FDCWD, path, 0); }
int unlinkat(int dirfd, const char* path, int flags) { return do_unlink(dirfd, path, flags); }
int rmdir(const char* path) { return do_unlink(AT_FDCWD, path, AT_REMOVEDIR); }

int mkdir(const char* path, mode_t mode) { return do_mkdir(AT_FDCWD, path, mode); }
int mkdirat(int dirfd, const char* path, mode_t mode) { return do_mkdir(dirfd, path, mode); }

int link(const char* from, const char* to) { return do_link(AT_FDCWD, from, AT_FDCWD, to, 0); }
int linkat(int fd1, const char* from, int fd2, const char* to, int flags) {
    return do_link(fd1, from, fd2, to, flags);
}

}  // extern "C"
