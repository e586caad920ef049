// Bytes through image.judged_triplets' parser (plugins/image/core/judged_triplets.cpp), the way
// the node reads a user's files: as the triplet file by path (default header names, and mapped
// onto other names), and as the URL index of a fixed triplet file. Image files are not looked
// up (check_files off), so the parse itself is what runs. A bad file must be an
// embedflow::Error, never a crash.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "core/judged_triplets.hpp"
#include "embedflow/error.hpp"
#include "fuzz_input_file.hpp"

namespace {

using embedflow::image::JudgedTripletOptions;

void read(const std::string& path, const JudgedTripletOptions& o) {
  try {
    (void)embedflow::image::read_judged_triplets(path, o);
  } catch (const embedflow::Error&) {
  }
}

// A triplet file naming three URLs, for the fuzzed index to resolve.
const std::string& url_triplets() {
  static const std::string path = [] {
    const std::string p = "/tmp/embedflow-fuzz-" + std::to_string(::getpid()) + ".urls.csv";
    std::ofstream(p) << "query,a,b,judgement\nhttp://x/q.jpg,http://x/a.jpg,http://x/b.jpg,neither\n";
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = embedflow::fuzz::input_file(data, size, ".csv");
  JudgedTripletOptions plain;
  plain.check_files = false;
  read(path, plain);
  JudgedTripletOptions mapped = plain;
  mapped.root = "/nonexistent/root";
  mapped.columns = {{"query", "q_url"}, {"a", "left"}, {"b", "right"}, {"judgement", "answer"}};
  read(path, mapped);
  JudgedTripletOptions by_url = plain;
  by_url.index = path;
  read(url_triplets(), by_url);
  return 0;
}
