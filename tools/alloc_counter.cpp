#include "tools/alloc_counter.hpp"

#include <atomic>
#include <cstddef>

// Counts every heap allocation of the process by interposing malloc and its
// siblings (operator new, Eigen's aligned allocator and the STL all end in
// one of these) and forwarding to glibc's implementation.
#if defined(__SANITIZE_ADDRESS__)
// ASan replaces malloc itself; interposing it too would crash at start-up.
namespace mambarl {
uint64_t heap_allocations() { return 0; }
bool heap_allocations_counted() { return false; }
}  // namespace mambarl
#else
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<uint64_t> g_allocations{0};
void count() { g_allocations.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

namespace mambarl {
uint64_t heap_allocations() { return g_allocations.load(std::memory_order_relaxed); }
bool heap_allocations_counted() { return true; }
}  // namespace mambarl

extern "C" {
__attribute__((visibility("default"))) void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
__attribute__((visibility("default"))) void* calloc(size_t n, size_t m) {
  count();
  return __libc_calloc(n, m);
}
__attribute__((visibility("default"))) void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
__attribute__((visibility("default"))) int posix_memalign(void** out, size_t align, size_t n) {
  count();
  void* p = __libc_memalign(align, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}
__attribute__((visibility("default"))) void* aligned_alloc(size_t align, size_t n) {
  count();
  return __libc_memalign(align, n);
}
}
#endif  // __SANITIZE_ADDRESS__
