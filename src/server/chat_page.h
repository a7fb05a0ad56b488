// The chat page served at GET / (and /index.html): src/server/chat_page.html, a single
// self-contained HTML file (inline CSS and JavaScript) that talks to /v1/models and, streaming,
// /v1/chat/completions. CMake compiles the file into the binary (cmake/embed_text.cmake), so the
// server needs no asset directory and a change to the HTML rebuilds it.
#pragma once

#include <string_view>

namespace folio::server {

std::string_view chat_page_html();

}  // namespace folio::server
