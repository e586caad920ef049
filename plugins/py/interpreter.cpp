// The embedded interpreter, shared by the py family's nodes.
#include <dlfcn.h>
#include <pybind11/embed.h>

#include <mutex>

#include "py_types.hpp"

namespace embedflow::py_family {
namespace py = pybind11;

void ensure_interpreter() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (Py_IsInitialized()) return;  // inside a Python program: its interpreter, its GIL
    // The engine loads plugins with RTLD_LOCAL, so libpython's symbols would stay private to
    // this plugin, and extension modules (numpy's) that expect them globally would fail to
    // import. Promote the already loaded libpython to the global scope.
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&Py_InitializeEx), &info) && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    // No Python signal handlers: Ctrl-C belongs to the CLI, which drains the graph.
    Py_InitializeEx(0);
    // Hand the GIL back: the thread that started the interpreter is one of the engine's, and
    // every call takes the GIL for itself (PyGILState) on whichever worker makes it.
    PyEval_SaveThread();
  });
}

std::string python_traceback(const py::error_already_set& e) {
  try {
    py::object format = py::module_::import("traceback").attr("format_exception");
    std::string text;
    for (auto line : format(e.type(), e.value(), e.trace())) text += line.cast<std::string>();
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  } catch (const py::error_already_set&) {
    return e.what();
  }
}

}  // namespace embedflow::py_family
