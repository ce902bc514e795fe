// A small C++ program for the quickstart (deploy/quickstart.sh): libstdc++
// APIs a C++ programmer calls every day (std::string::find,
// std::filesystem::exists, std::ofstream::write, std::regex_search),
// measured under `fieldprof run` like the C programs, then looked at as
// the editor shows them (`fieldprof lsp --hover`).
//
//   g++ -O2 -o cxx-demo deploy/workloads/cxx-demo.cc && ./cxx-demo DIR
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i) + " fieldprof quickstart\n";
  size_t hits = 0;
  for (size_t at = text.find("quick"); at != std::string::npos; at = text.find("quick", at + 1)) {
    ++hits;
  }
  size_t found = 0;
  for (int i = 0; i < 200; ++i)
    found += std::filesystem::exists(dir + "/f" + std::to_string(i % 7));
  std::ofstream out(dir + "/cxx-demo.txt");
  for (int i = 0; i < 500; ++i) out.write(text.data() + i, 64);
  out.close();
  const std::regex number("[0-9]+ fieldprof");
  size_t numbers = 0;
  for (int i = 0; i < 200; ++i) numbers += std::regex_search(text.substr(i * 40, 40), number);
  std::cout << hits << " " << found << " " << numbers << "\n";
  return 0;
}
