// Replays every file of a fuzz corpus directory through the fuzz target, so
// the corpus runs as a plain regression test under any compiler.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream f(e.path(), std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // In a buffer of exactly its size, as libFuzzer gives it: a string's
    // NUL and spare capacity would hide a read past the end.
    const std::unique_ptr<uint8_t[]> exact(new uint8_t[s.size()]);
    std::memcpy(exact.get(), s.data(), s.size());
    LLVMFuzzerTestOneInput(exact.get(), s.size());
    ++n;
  }
  std::printf("replayed %d corpus files\n", n);
  return n > 0 ? 0 : 1;
}
