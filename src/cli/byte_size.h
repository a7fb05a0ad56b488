// Memory sizes as users type them: "268435456", "512M", "2G", "1.5GiB". Suffixes are binary
// (K = 1024), as in llama.cpp and free(1), because KV budgets are sized against GiB of RAM.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace folio::cli {

// A positive number of bytes, or an error that quotes the text and shows the accepted form.
Expected<int64_t> parse_byte_size(const std::string& text);

}  // namespace folio::cli
