// A heap-failure shim for the host-OOM test (design/reliability.md T33), loaded into `frost serve`
// with LD_PRELOAD; never part of frost itself.
//
// It replaces the allocating entry points of the C heap (malloc, calloc, realloc, the aligned
// forms) with ones that may return NULL, as an exhausted heap or an address-space limit makes them
// do; operator new, which libstdc++ builds on malloc, then throws std::bad_alloc. free and the rest
// of glibc's allocator stay as they are: every block still comes from glibc (__libc_malloc and
// friends, which glibc exports for this purpose), so frees are untouched.
//
// The test steers it through a small file it names in FROST_ALLOC_SHIM_CTL, mapped shared, so the
// mode changes while the server runs without a signal or a syscall per allocation:
//   offset 0  uint32 mode        0: pass everything; 1: fail a request of at least min_bytes with
//                                probability permille / 1000
//   offset 4  uint32 permille
//   offset 8  uint64 min_bytes
//   offset 16 uint64 considered  (written by the shim) requests of at least min_bytes in mode 1
//   offset 24 uint64 failed      (written by the shim) requests it refused
// Without the variable, or before the mapping exists (allocations made while the dynamic loader
// starts the process), everything passes.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {

struct Control {
    uint32_t mode;
    uint32_t permille;
    uint64_t min_bytes;
    uint64_t considered;
    uint64_t failed;
};

Control* g_ctl = nullptr;
uint64_t g_draws = 0;  // the random stream's position (atomically advanced; any thread)

__attribute__((constructor)) void map_control() {
    const char* path = getenv("FROST_ALLOC_SHIM_CTL");
    if (!path || !*path) return;
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    void* p = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) __atomic_store_n(&g_ctl, static_cast<Control*>(p), __ATOMIC_RELEASE);
}

// splitmix64 over a shared counter: thread-safe without thread-local storage, whose first touch
// in a preloaded library may itself allocate.
uint64_t draw() {
    uint64_t z = __atomic_add_fetch(&g_draws, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Whether this request of `bytes` is refused.
bool refuse(size_t bytes) {
    Control* c = __atomic_load_n(&g_ctl, __ATOMIC_ACQUIRE);
    if (!c || __atomic_load_n(&c->mode, __ATOMIC_RELAXED) != 1) return false;
    if (bytes < __atomic_load_n(&c->min_bytes, __ATOMIC_RELAXED)) return false;
    __atomic_add_fetch(&c->considered, 1, __ATOMIC_RELAXED);
    if (draw() % 1000 >= __atomic_load_n(&c->permille, __ATOMIC_RELAXED)) return false;
    __atomic_add_fetch(&c->failed, 1, __ATOMIC_RELAXED);
    errno = ENOMEM;
    return true;
}

}  // namespace

extern "C" {

void* malloc(size_t n) { return refuse(n) ? nullptr : __libc_malloc(n); }

void* calloc(size_t n, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) bytes = SIZE_MAX;
    return refuse(bytes) ? nullptr : __libc_calloc(n, size);
}

// A refused realloc leaves the old block as it was, as the real one does.
void* realloc(void* p, size_t n) { return refuse(n) ? nullptr : __libc_realloc(p, n); }

void* memalign(size_t align, size_t n) { return refuse(n) ? nullptr : __libc_memalign(align, n); }

void* aligned_alloc(size_t align, size_t n) { return refuse(n) ? nullptr : __libc_memalign(align, n); }

int posix_memalign(void** out, size_t align, size_t n) {
    if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
    if (refuse(n)) return ENOMEM;
    void* p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void* valloc(size_t n) { return refuse(n) ? nullptr : __libc_memalign(size_t(sysconf(_SC_PAGESIZE)), n); }

}  // extern "C"
