#include "photo_id.hpp"

#include <openssl/evp.h>

#include "embedflow/error.hpp"

namespace embedflow::geo {

std::int64_t photo_id(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &n, EVP_sha256(), nullptr) != 1 || n < 8)
    throw Error("SHA-256 failed (OpenSSL)");
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return static_cast<std::int64_t>(v & 0x7fffffffffffffffULL);
}

}  // namespace embedflow::geo
