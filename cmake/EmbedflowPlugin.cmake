# embedflow_add_plugin(NAME <family> SOURCES ... [LIBS ...])
# Builds libembedflow_<family>.so into the plugin directory, linked against the SDK only.
# Installed with the SDK so out-of-tree plugins build the same way.
function(embedflow_add_plugin)
  cmake_parse_arguments(P "" "NAME" "SOURCES;LIBS" ${ARGN})
  set(target embedflow_${P_NAME})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE embedflow::sdk ${P_LIBS})
  # build/plugins/../lib, or <prefix>/lib/embedflow/plugins/../.. = <prefix>/lib when installed.
  set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME "embedflow_${P_NAME}"
    INSTALL_RPATH "$ORIGIN/../lib;$ORIGIN/../..")
  if(DEFINED EMBEDFLOW_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${EMBEDFLOW_PLUGIN_DIR})
  endif()
  # Where an installed embedflow looks (bin/../<libdir>/embedflow/plugins), as its own component
  # so `cmake --install --component Unspecified` installs the SDK alone.
  include(GNUInstallDirs)
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/embedflow/plugins COMPONENT plugins)
endfunction()
