#include "npy.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "embedflow/error.hpp"

namespace embedflow::metriccore {

void write_npy(const std::string& path, const std::vector<double>& data, const std::vector<std::int64_t>& shape) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64.
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error(cat("cannot write '", tmp, "'"));
    out.write("\x93NUMPY\x01\x00", 8);
    const auto len = static_cast<std::uint16_t>(header.size());
    const char lenb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(lenb, 2);
    out << header;
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(double)));
    if (!out) throw Error(cat("write to '", tmp, "' failed"));
  }
  std::filesystem::rename(tmp, p, ec);
  if (ec) throw Error(cat("cannot rename '", tmp, "' to '", path, "': ", ec.message()));
}

std::vector<double> read_npy(const std::string& path, std::vector<std::int64_t>& shape) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(cat("cannot open '", path, "'"));
  char magic[10];
  in.read(magic, 10);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw DataError(cat("'", path, "' is not a .npy file"));
  const std::size_t len = static_cast<unsigned char>(magic[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(magic[9])) << 8);
  std::string header(len, ' ');
  in.read(header.data(), static_cast<std::streamsize>(len));
  if (header.find("'<f8'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw DataError(cat("'", path, "' must hold C-order float64 data, header: ", header));
  shape.clear();
  const auto open = header.find('('), close = header.find(')');
  std::int64_t count = 1;
  std::string dims = header.substr(open + 1, close - open - 1);
  std::size_t pos = 0;
  while (pos < dims.size()) {
    const auto comma = dims.find(',', pos);
    const std::string item = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.find_first_not_of(' ') != std::string::npos) {
      shape.push_back(std::stoll(item));
      count *= shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<double> data(static_cast<std::size_t>(count));
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(double)));
  if (!in) throw DataError(cat("'", path, "' is truncated"));
  return data;
}

}  // namespace embedflow::metriccore
