// Plugin entry point. Each plugin .so exports exactly one descriptor through a Boost.DLL alias;
// the engine reads its plain-C header fields (ABI, toolchain) before it calls anything, and
// refuses a mismatch with a message naming both sides. Registration is one explicit function,
// never static initialisers (which the linker may drop).
//
//   static void register_types(embedflow::Registry& r) { r.add(limit_type()); ... }
//   EMBEDFLOW_PLUGIN("core", "0.1.0", "", register_types)
#pragma once

#include <boost/dll/alias.hpp>

#include "embedflow/registry.hpp"
#include "embedflow/version.hpp"

namespace embedflow {

// Layout is frozen for every ABI version: only the first two fields are read before checks pass.
struct PluginDescriptor {
  unsigned abi_version;
  const char* toolchain;       // EMBEDFLOW_TOOLCHAIN_ID the plugin was built with
  const char* sdk_version;
  const char* name;            // plugin family, e.g. "core"
  const char* version;
  const char* libraries;       // third-party versions, e.g. "LibTorch 1.13.0"
  void (*register_types)(Registry&);
};

using PluginDescriptorFn = const PluginDescriptor*();
inline constexpr const char* kPluginAlias = "embedflow_plugin_descriptor";

}  // namespace embedflow

#define EMBEDFLOW_PLUGIN(NAME, VERSION, LIBRARIES, REGISTER_FN)                                    \
  namespace embedflow_plugin_export {                                                              \
  const ::embedflow::PluginDescriptor* descriptor() {                                              \
    static const ::embedflow::PluginDescriptor d{EMBEDFLOW_ABI_VERSION, EMBEDFLOW_TOOLCHAIN_ID,     \
                                                 EMBEDFLOW_VERSION_STRING, NAME, VERSION,          \
                                                 LIBRARIES, &REGISTER_FN};                         \
    return &d;                                                                                     \
  }                                                                                                \
  }                                                                                                \
  BOOST_DLL_ALIAS(embedflow_plugin_export::descriptor, embedflow_plugin_descriptor)
