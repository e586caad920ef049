// Versions that a plugin and the engine must agree on before any C++ object crosses the .so
// boundary. Bump EMBEDFLOW_ABI_VERSION whenever a type in this SDK changes layout or a virtual
// function is added, removed or reordered.
#pragma once

#define EMBEDFLOW_VERSION_STRING "0.1.0"
#define EMBEDFLOW_ABI_VERSION 3u

#define EMBEDFLOW_STRINGIFY_IMPL(x) #x
#define EMBEDFLOW_STRINGIFY(x) EMBEDFLOW_STRINGIFY_IMPL(x)

// Compiler identity written into every plugin descriptor: the C++ types passed through the
// registry (std::string, std::function, std::shared_ptr) are only layout-compatible when the
// compiler family, its major version and the libstdc++ dual ABI agree.
#if defined(__clang__)
#define EMBEDFLOW_COMPILER_ID "clang-" EMBEDFLOW_STRINGIFY(__clang_major__)
#elif defined(__GNUC__)
#define EMBEDFLOW_COMPILER_ID "gcc-" EMBEDFLOW_STRINGIFY(__GNUC__)
#else
#define EMBEDFLOW_COMPILER_ID "unknown"
#endif

#if defined(_GLIBCXX_USE_CXX11_ABI)
#define EMBEDFLOW_CXX_ABI_ID "cxx11abi-" EMBEDFLOW_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)
#else
#define EMBEDFLOW_CXX_ABI_ID "cxx11abi-none"
#endif

#define EMBEDFLOW_TOOLCHAIN_ID EMBEDFLOW_COMPILER_ID "/" EMBEDFLOW_CXX_ABI_ID

namespace embedflow {
inline constexpr unsigned kAbiVersion = EMBEDFLOW_ABI_VERSION;
inline constexpr const char* kVersion = EMBEDFLOW_VERSION_STRING;
inline constexpr const char* kToolchain = EMBEDFLOW_TOOLCHAIN_ID;
}  // namespace embedflow
