// Random-weight models of real shapes (`folio synth`): benchmarks and GPU checks need an 8B or
// 70B-shaped model without downloading one. Weights are drawn like an initialisation (uniform
// with standard deviation 0.02, norms 1) so activations stay finite through every layer; the
// vocabulary is byte-level BPE (256 bytes, a few hundred merges, filler and special tokens) so
// that folio's tokenizer loads it and any text encodes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace folio {

struct SynthConfig {
  std::string name;  // smollm2-135m, llama3-8b, llama3-70b(-1layer), tiny, tiny-k256, gemma3-tiny, gemma3-270m
  int32_t num_layers = 0;
  int32_t hidden_dim = 0;
  int32_t ffn_dim = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  float rope_freq_base = 10000.0f;
  bool llama3_rope_scaling = false;  // writes rope_freqs.weight (Llama 3.1: factor 8, 1 / 4)
  bool tied_embeddings = false;
  bool llama3_vocab = false;  // Llama-3 special tokens at 128000+; else SmolLM2's at 0..2
  // Gemma 3's shape (gemma3-tiny, gemma3-270m): QK and post norms, GELU, and local layers of this window.
  std::string architecture = "llama";
  int32_t head_dim = 0;  // 0: hidden / heads
  int32_t sliding_window = 0;
};

// The known shapes; an error lists them.
Expected<SynthConfig> synth_config(std::string_view name);
std::vector<std::string> synth_config_names();

struct SynthOptions {
  // 2-D weights: BF16, F16, F32, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K or Q6_K (K-quants need
  // every matrix's width a multiple of 256).
  DType weight_type = DType::BF16;
  uint64_t seed = 1;
  int32_t num_layers = 0;  // 0: the config's
  // With Q4_K: attn_v, ffn_down and the output matrix in Q6_K, as llama.cpp's Q4_K_M mix
  // gives them (it does so in about half the layers; here in every one).
  bool q4_k_m = false;
};

// How a synth model's values are drawn, shared by its GGUF and Hugging Face writers so that one
// seed gives the same model in both (synth_hf_model.h): the 2-D weights are numbered in GGUF
// order from 1 (token_embd, then each layer's attn_q, attn_k, attn_v, attn_output, ffn_gate,
// ffn_up, ffn_down, then output), and row r of weight i (rows in computing order, as GGUF
// stores Q and K) is synth_fill_row(synth_row_seed(synth_tensor_seed(seed, i), r), 0.02, ..).
uint64_t synth_tensor_seed(uint64_t seed, uint64_t tensor_index);
uint64_t synth_row_seed(uint64_t tensor_seed, int64_t row);
// Uniform in [-a, a) with a = std_dev * sqrt(3), from the seed alone.
void synth_fill_row(uint64_t seed, float std_dev, float* row, int64_t n);
inline constexpr float kSynthWeightStd = 0.02f;

// The byte-level BPE vocabulary (tokens, 1 normal / 3 control, merges "a b") and its specials.
struct SynthVocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int32_t bos = 0, eos = 0, eot = -1;
  bool add_bos = false;  // Llama 3's vocabulary starts every prompt with BOS
};
SynthVocabulary synth_vocabulary(const SynthConfig& config);

// Writes the model to path, streaming (memory stays flat), filling rows on all cores.
// progress(bytes written, total bytes).
Status write_synth_model(const SynthConfig& config, const SynthOptions& options, const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace folio
