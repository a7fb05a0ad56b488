// Walks a parsed template and renders it. Scoping follows jinja2: each for-loop iteration and
// each macro call gets its own scope (a `set` inside a loop body is gone after the
// iteration; namespace() is how templates carry state out), while if-blocks share their
// enclosing scope.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "text/jinja_ast.h"

namespace folio::jinja {

// Bounds on one render, so a hostile template fails with a Status instead of exhausting the
// stack, the CPU or memory.
struct RenderLimits {
  int max_depth = 512;                      // nested expressions, blocks and macro calls
  int64_t max_loop_iterations = 1'000'000;  // summed over all loops of the render
  size_t max_output_bytes = 64u << 20;
};

// `context` holds the template's variables (messages, add_generation_prompt, ...); builtin
// globals (range, namespace, raise_exception, ...) sit below it and can be shadowed.
Expected<std::string> render(const StmtList& program, const Dict& context, const RenderLimits& limits = {});

}  // namespace folio::jinja
