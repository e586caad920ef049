#include "embedflow_runs/report.hpp"

#include <openssl/evp.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "embedflow_runs/run_record.hpp"
#include "embedflow/error.hpp"

#ifndef EMBEDFLOW_SOURCE_REPORT_ASSETS
#define EMBEDFLOW_SOURCE_REPORT_ASSETS ""
#endif

namespace embedflow::runs {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// The pages' own scripts and styles, embedded from page/ by the build (page_files.cpp).
const char* page_file(const std::string& name);

// vega-interpreter evaluates Vega's expressions without eval(), so the page's policy need not allow it.
const char* const kReportAssetFiles[4] = {"vega.min.js", "vega-lite.min.js", "vega-embed.min.js", "vega-interpreter.min.js"};

fs::path report_asset_file(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  if (fs::exists(dir / name, ec)) return dir / name;
  const std::string package = name.substr(0, name.find(".min.js"));
  return dir / "node_modules" / package / "build" / name;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(cat("cannot read '", p.string(), "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string script_json(const json& j) {
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

std::string script_text(std::string js) {
  for (std::size_t at = js.find("</script"); at != std::string::npos; at = js.find("</script", at + 2)) js.insert(at + 1, "\\");
  return js;
}

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                 static_cast<unsigned char>(bytes[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (i < bytes.size()) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

namespace {
std::string sha256_base64(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  return base64(std::string(reinterpret_cast<const char*>(digest), len));
}
}  // namespace

fs::path find_report_assets() {
  auto has_all = [](const fs::path& dir) {
    std::error_code ec;
    for (const char* f : kReportAssetFiles)
      if (!fs::exists(report_asset_file(dir, f), ec)) return false;
    return true;
  };
  if (const char* env = std::getenv("EMBEDFLOW_REPORT_ASSETS"))
    if (has_all(env)) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path().parent_path() / "share" / "embedflow" / "report";
    if (has_all(installed)) return installed;
  }
  // A build tree: the packages tools/setup installed in the source tree, flattened by name.
  const fs::path source = EMBEDFLOW_SOURCE_REPORT_ASSETS;
  if (!source.empty() && has_all(source)) return source;
  return {};
}

std::vector<std::string> report_library_texts(const fs::path& assets) {
  if (assets.empty())
    throw Error("the chart library (vega, vega-lite, vega-embed, vega-interpreter) was not found: run tools/setup, or "
                "point EMBEDFLOW_REPORT_ASSETS at a folder holding vega.min.js, vega-lite.min.js, vega-embed.min.js "
                "and vega-interpreter.min.js");
  std::vector<std::string> texts;
  for (const char* f : kReportAssetFiles) texts.push_back(script_text(read_bytes(report_asset_file(assets, f))));
  return texts;
}

std::string content_security_policy(const std::vector<std::string>& scripts, const std::vector<std::string>& styles) {
  std::string policy = "default-src 'none'; script-src";
  for (const auto& s : scripts) policy += " 'sha256-" + sha256_base64(s) + "'";
  policy += "; style-src";
  for (const auto& s : styles) policy += " 'sha256-" + sha256_base64(s) + "'";
  policy += "; img-src data:; base-uri 'none'; form-action 'none'";
  return "<meta http-equiv=\"Content-Security-Policy\" content=\"" + policy + "\">";
}

std::string page_text(const std::string& name) {
  const char* text = page_file(name);
  if (!text) throw Error(cat("the report page's file '", name, "' was not built in"));
  return text;
}

void write_page(const fs::path& output, const std::string& title, const std::string& style,
                const std::vector<std::string>& libraries, const std::string& data_id, const json& data,
                const std::string& script) {
  std::vector<std::string> scripts = libraries;
  scripts.push_back(script);
  std::ostringstream html;
  // The policy allows exactly the page's own inline scripts and style (the JSON data block is
  // not executed) and data: images.
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       << content_security_policy(scripts, {style}) << "\n"
       << "<title>" << xml_escape(title) << "</title>\n"
       << "<style>" << style << "</style>\n";
  for (const auto& text : libraries) html << "<script>" << text << "</script>\n";
  html << "<script type=\"application/json\" id=\"" << data_id << "\">" << script_json(data) << "</script>\n"
       << "</head><body data-status=\"loading\"><div id=\"report\"></div>\n"
       << "<script>" << script << "</script>\n</body></html>\n";
  write_file_replacing(output, html.str());
}

}  // namespace embedflow::runs
