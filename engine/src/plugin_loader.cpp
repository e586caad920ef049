#include "embedflow_engine/plugin_loader.hpp"

#include <boost/dll/runtime_symbol_info.hpp>
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "embedflow/plugin.hpp"

namespace embedflow::engine {
namespace fs = std::filesystem;

std::vector<std::string> PluginLoader::default_search_path(const std::vector<std::string>& explicit_dirs) {
  std::vector<std::string> path = explicit_dirs;
  if (const char* env = std::getenv("EMBEDFLOW_PLUGIN_PATH")) {
    std::stringstream s(env);
    std::string dir;
    while (std::getline(s, dir, ':'))
      if (!dir.empty()) path.push_back(dir);
  }
  // build/bin/embedflow -> build/plugins; <prefix>/bin/embedflow -> <prefix>/lib/embedflow/plugins
  boost::system::error_code ec;
  fs::path exe = boost::dll::program_location(ec).string();
  if (!ec) {
    fs::path bin = exe.parent_path();
    path.push_back((bin.parent_path() / "plugins").string());
    path.push_back((bin.parent_path() / "lib" / "embedflow" / "plugins").string());
#ifdef EMBEDFLOW_INSTALL_PLUGIN_DIR
    // The libdir the tree was installed with (lib/x86_64-linux-gnu under /usr on Debian).
    const fs::path installed = bin.parent_path() / EMBEDFLOW_INSTALL_PLUGIN_DIR;
    if (installed != bin.parent_path() / "lib" / "embedflow" / "plugins") path.push_back(installed.string());
#endif
  }
  return path;
}

namespace {

// dlopen maps a library and faults (SIGBUS) when it touches a page past the end of a truncated
// file, killing the process with no message. Every part the loader maps is named in the ELF
// headers, so checking them against the file size first turns that into an error.
void check_elf_whole(const std::string& path) {
  auto bad = [&](const std::string& why) { throw ConfigError(cat("plugin ", path, ": cannot load: ", why)); };
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) bad("not a regular file");
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec) bad(ec.message());
  std::ifstream f(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    bad("not an ELF shared library");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr)) bad("not a 64-bit ELF library");
  auto beyond = [&](std::uint64_t offset, std::uint64_t length) { return offset > size || length > size - offset; };
  if (beyond(eh.e_phoff, std::uint64_t{eh.e_phnum} * eh.e_phentsize) ||
      (eh.e_shnum && beyond(eh.e_shoff, std::uint64_t{eh.e_shnum} * eh.e_shentsize)))
    bad(cat("truncated or damaged (", size, " bytes; its headers reach past the end)"));
  f.seekg(static_cast<std::streamoff>(eh.e_phoff));
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!f.read(reinterpret_cast<char*>(&ph), sizeof ph)) bad("truncated program headers");
    if (ph.p_type == PT_LOAD && beyond(ph.p_offset, ph.p_filesz))
      bad(cat("truncated or damaged (", size, " bytes; a segment ends at byte ", ph.p_offset + ph.p_filesz, ")"));
  }
}

}  // namespace

PluginLoader::PluginLoader(std::vector<std::string> search_path) : search_path_(std::move(search_path)) {}

std::vector<fs::path> PluginLoader::plugin_files() const {
  std::set<std::string> seen_names;
  std::vector<fs::path> out;
  for (const auto& dir : search_path_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("libembedflow_", 0) == 0 && entry.path().extension() == ".so" && name != "libembedflow_sdk.so" &&
          name != "libembedflow_hdf5.so")
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (seen_names.insert(f.filename().string()).second) out.push_back(f);  // else shadowed by an earlier dir
  }
  return out;
}

void PluginLoader::load_all(Registry& registry) {
  for (const auto& f : plugin_files())
    if (!loaded_names_.count(f.filename().string())) load_file(f.string(), registry);
}

void PluginLoader::load_families(Registry& registry, const std::set<std::string>& families) {
  for (const auto& f : plugin_files()) {
    const std::string name = f.filename().string();
    const std::string family = name.substr(std::string("libembedflow_").size(), name.size() - std::string("libembedflow_").size() - 3);
    if (families.count(family) && !loaded_names_.count(name)) load_file(f.string(), registry);
  }
}

void PluginLoader::load_file(const std::string& path, Registry& registry) {
  check_elf_whole(path);  // also refuses a FIFO named like a plugin, which would block the read
  auto lib = std::make_shared<boost::dll::shared_library>();
  boost::system::error_code ec;
  lib->load(path, boost::dll::load_mode::default_mode, ec);
  if (ec) {
    // Boost's error code only says "failed"; dlerror() holds the useful text (missing symbol or
    // dependency), so load once more through dlopen to report it.
    std::string why = ec.message();
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) dlclose(h);
    else if (const char* e = dlerror()) why = e;
    throw ConfigError(cat("plugin ", path, ": cannot load: ", why));
  }
  if (!lib->has(kPluginAlias))
    throw ConfigError(cat("plugin ", path, ": no '", kPluginAlias,
                          "' symbol; is it an embedflow plugin built with EMBEDFLOW_PLUGIN(...)?"));
  auto& fn = lib->get_alias<PluginDescriptorFn>(kPluginAlias);
  const PluginDescriptor* d = fn();
  if (!d) throw ConfigError(cat("plugin ", path, ": descriptor is null"));
  if (d->abi_version != kAbiVersion)
    throw ConfigError(cat("plugin ", path, ": built for embedflow ABI ", d->abi_version, " but this engine has ABI ",
                          kAbiVersion, "; rebuild the plugin against this SDK"));
  if (std::string(d->toolchain ? d->toolchain : "") != kToolchain)
    throw ConfigError(cat("plugin ", path, ": built with toolchain ", d->toolchain ? d->toolchain : "(none)",
                          " but the engine uses ", kToolchain, "; C++ types cannot cross that boundary safely"));
  if (!d->register_types) throw ConfigError(cat("plugin ", path, ": descriptor has no registration function"));
  // Types registered below keep code in this library (vtables, std::function targets) that
  // may outlive the loader, e.g. in a static registry: pin it so it is never unloaded.
  dlopen(path.c_str(), RTLD_NOW | RTLD_NODELETE);
  loaded_names_.insert(fs::path(path).filename().string());
  registry.set_current_plugin(d->name ? d->name : "", path, d->version ? d->version : "");
  d->register_types(registry);
  registry.set_current_plugin("", "", "");
  plugins_.push_back(LoadedPlugin{d->name ? d->name : "", d->version ? d->version : "", path,
                                  d->libraries ? d->libraries : "", d->toolchain, d->sdk_version ? d->sdk_version : ""});
  libraries_.push_back(std::move(lib));
}

}  // namespace embedflow::engine
