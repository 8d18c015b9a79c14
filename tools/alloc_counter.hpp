// Counts heap allocations made through operator new in this process, so the
// benches can show that the T=1 step allocates nothing after warm-up.
#pragma once

#include <cstdint>

namespace mambarl {
uint64_t heap_allocations();        // total malloc-family calls so far
bool heap_allocations_counted();   // false under AddressSanitizer, which owns malloc itself
}
