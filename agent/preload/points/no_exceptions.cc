// The recorder is built without exceptions and with the C++ library's few
// parts it uses linked in (CMakeLists.txt). The library's containers still
// call these when a size is impossible or memory runs out, and its
// operator new throws; defined here (not exported: the program keeps its
// own), they end the process as an uncaught exception would, and the
// linker pulls in none of the exception machinery. Its emergency pool
// would otherwise call malloc from this library's constructors, after the
// recorder has armed, where a point placed on malloc would count it as
// the program's call.
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <system_error>

namespace std {

void __throw_bad_alloc() { abort(); }
void __throw_bad_array_new_length() { abort(); }
void __throw_length_error(const char*) { abort(); }
void __throw_logic_error(const char*) { abort(); }
void __throw_out_of_range_fmt(const char*, ...) { abort(); }
void __throw_system_error(int) { abort(); }

}  // namespace std

void* operator new(std::size_t n) {
  if (void* p = malloc(n == 0 ? 1 : n)) return p;
  abort();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { free(p); }
void operator delete(void* p, std::size_t) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete[](void* p, std::size_t) noexcept { free(p); }
