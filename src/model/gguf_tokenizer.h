// A GGUF file's tokenizer: its tokenizer.ggml.* keys read into TokenizerMetadata (type errors
// named here, where the key types are known) and handed to the text module.
#pragma once

#include "core/status.h"
#include "model/gguf_file.h"
#include "text/tokenizer.h"
#include "text/tokenizer_metadata.h"

namespace folio {

Expected<TokenizerMetadata> tokenizer_metadata_from_gguf(const GgufFile& file);
Expected<Tokenizer> tokenizer_from_gguf(const GgufFile& file);

}  // namespace folio
