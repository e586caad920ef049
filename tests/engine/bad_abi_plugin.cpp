// A plugin that claims another ABI version: the engine must refuse it before calling into it.
#include <embedflow/plugin.hpp>

namespace {
void register_types(embedflow::Registry&) {}
}  // namespace

namespace embedflow_plugin_export {
const embedflow::PluginDescriptor* descriptor() {
  static const embedflow::PluginDescriptor d{EMBEDFLOW_ABI_VERSION + 41, EMBEDFLOW_TOOLCHAIN_ID, "9.9.9", "badabi",
                                             "1.0", "", &register_types};
  return &d;
}
}  // namespace embedflow_plugin_export
BOOST_DLL_ALIAS(embedflow_plugin_export::descriptor, embedflow_plugin_descriptor)
