// Report pages checked in a real browser: headless Chromium (Debian's chromium) loads a page,
// and the tests read what it did from the DOM after the scripts ran, the console messages and a
// screenshot. Shared by the run report's tests and the sweep report's.
#pragma once

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace embedflow::test {

struct Page {
  std::string dom;
  std::string console;  // Chromium's CONSOLE log lines: messages the page printed or threw
  std::filesystem::path screenshot;
};

// Loads `html` in headless Chromium twice: once dumping the DOM after the scripts ran, once
// taking a screenshot. Chromium's own log lines (D-Bus, GPU) are not the page's and are ignored.
inline Page load_in_chromium(const std::filesystem::path& html, const std::filesystem::path& work) {
  namespace fs = std::filesystem;
  Page page;
  const std::vector<std::string> common{"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                        "--user-data-dir=" + (work / "chromium-profile").string(),
                                        "--enable-logging=stderr", "--log-level=0", "--virtual-time-budget=30000"};
  std::vector<std::string> dump = common;
  dump.push_back("--dump-dom");
  dump.push_back("file://" + fs::absolute(html).string());
  Result r = run_process(dump);
  REQUIRE(r.exit_code == 0);
  page.dom = r.out;
  std::string console;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);)
    if (line.find(":CONSOLE") != std::string::npos) console += line + "\n";
  page.screenshot = work / (html.stem().string() + ".png");
  std::vector<std::string> shot = common;
  shot.push_back("--window-size=1300,1800");
  shot.push_back("--screenshot=" + page.screenshot.string());
  shot.push_back("file://" + fs::absolute(html).string());
  r = run_process(shot);
  REQUIRE(r.exit_code == 0);
  std::istringstream err2(r.err);
  for (std::string line; std::getline(err2, line);)
    if (line.find(":CONSOLE") != std::string::npos) console += line + "\n";
  page.console = console;
  return page;
}

inline std::string body_attr(const std::string& dom, const std::string& name) {
  std::smatch m;
  std::regex re("<body[^>]*\\s" + name + "=\"([^\"]*)\"");
  return std::regex_search(dom, m, re) ? m[1].str() : "";
}

// The page's script finished (body[data-status] "done") with no error and no console message,
// and drew every chart it meant to, at least one.
inline void check_page_works(const Page& page) {
  INFO(page.console);
  CHECK(page.console.empty());
  CHECK(body_attr(page.dom, "data-status") == "done");
  CHECK(body_attr(page.dom, "data-errors") == "0");
  const std::string expected = body_attr(page.dom, "data-charts-expected");
  REQUIRE(!expected.empty());
  CHECK(std::stoi(expected) > 0);
  CHECK(body_attr(page.dom, "data-charts-drawn") == expected);
}

// The screenshot is a page, not a blank: enough ink, several colours (charts' lines and marks).
// For check_python with the screenshot's path.
inline const char* const kCheckScreenshot = R"PY(
import sys
import numpy as np
from PIL import Image
img = np.asarray(Image.open(sys.argv[1]).convert("RGB")).astype(int)
ink = (np.abs(img - 255).sum(axis=2) > 60).mean()
colours = len({tuple(c) for c in img.reshape(-1, 3)[::7]})
print(f"ink {ink:.4f} colours {colours}")
assert ink > 0.03, f"screenshot nearly blank: {ink:.4f} of the pixels differ from white"
assert colours > 50, f"only {colours} colours"
)PY";

}  // namespace embedflow::test
