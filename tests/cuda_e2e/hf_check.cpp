// Hugging Face directories on the GPU (scripts/hf_test_models.py builds them; gpu-check runs
// this): the default model saved by transformers in bfloat16 and in float32, uploaded without
// a host copy of the bfloat16 weights (Q / K rows reordered by the copies themselves), against
// transformers' float32 forward (tests/golden/hf/smollm2): last-position logits and greedy
// tokens until a near-tie. The same numbers from the bfloat16 directory, its GGUF and the
// float32 directory (rounded to bfloat16 on upload) must give bit-identical GPU logits.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e_common.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"

namespace folio::e2e {
namespace {

struct Weights {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<HfCheckpoint> checkpoint;
  std::unique_ptr<ModelWeights> model;
};

Expected<Weights> open_weights(const std::string& path) {
  Weights w;
  if (path.ends_with(".gguf")) {
    Expected<GgufFile> file = GgufFile::open(path);
    if (!file) return file.status();
    w.file = std::make_unique<GgufFile>(std::move(file).value());
    Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*w.file);
    if (!model) return model.status();
    w.model = std::move(model).value();
    return Expected<Weights>(std::move(w));
  }
  Expected<HfModelConfig> config = read_hf_config(path);
  if (!config) return config.status();
  Expected<HfCheckpoint> checkpoint = HfCheckpoint::open(path);
  if (!checkpoint) return checkpoint.status();
  w.checkpoint = std::make_unique<HfCheckpoint>(std::move(checkpoint).value());
  HfLoadOptions options;
  options.for_cpu = false;  // views as stored: the upload reorders Q / K rows
  Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load_hf(*w.checkpoint, *config, options);
  if (!model) return model.status();
  w.model = std::move(model).value();
  return Expected<Weights>(std::move(w));
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

int run_hf(const std::vector<std::string>& args) {
  const std::string root = arg_value(args, "--dir", "");
  const std::string golden_dir = std::string(FOLIO_SOURCE_DIR) + "/tests/golden/hf/smollm2";
  const int32_t steps = 32;
  std::ifstream in(golden_dir + "/golden.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json golden = nlohmann::json::parse(text.str());
  Tally tally;
  std::map<std::string, std::vector<float>> chat_logits;
  for (const auto& [name, dtype] : {std::pair{"smollm2-bf16", "bfloat16"}, std::pair{"smollm2-f32", "float32"},
                                    std::pair{"smollm2-bf16.gguf", "bfloat16"}}) {
    const std::string path = root + "/" + name;
    auto start = std::chrono::steady_clock::now();
    Expected<Weights> w = open_weights(path);
    if (!w) {
      tally.check(false, std::string(name) + ": " + w.error());
      continue;
    }
    const double open_s = seconds_since(start);
    start = std::chrono::steady_clock::now();
    const int32_t max_tokens = 1184 + steps + 16;
    std::unique_ptr<cuda::CudaExecutor> gpu = cuda_executor(*w->model, max_tokens / kBlock + 4, 0, 64, max_tokens);
    const double upload_s = seconds_since(start);
    std::printf("%s: opened in %.3f s, on the device in %.3f s (%.2f GB of weights read, %.2f GB/s)\n", name, open_s,
                upload_s, w->model->weight_bytes() / 1e9, w->model->weight_bytes() / 1e9 / upload_s);
    std::printf("%-8s %7s %12s %12s %10s %14s %16s\n", "case", "prompt", "logit relerr", "max |diff|", "same top1",
                "first differ", "transformers margin");
    for (const auto& [case_name, entry] : golden.at("cases").items()) {
      const std::vector<int32_t> prompt = entry.at("prompt_ids");
      const Greedy got = run_greedy(*gpu, prompt, steps);
      const std::vector<float> ref = read_floats(golden_dir + "/" + case_name + "." + dtype + ".logits.f32");
      double diff = 0, norm = 0, worst = 0;
      int32_t top_got = 0, top_ref = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(got.last_prompt_logits[i]) - ref[i];
        diff += d * d;
        norm += static_cast<double>(ref[i]) * ref[i];
        worst = std::max(worst, std::fabs(d));
        if (got.last_prompt_logits[i] > got.last_prompt_logits[static_cast<size_t>(top_got)])
          top_got = static_cast<int32_t>(i);
        if (ref[i] > ref[static_cast<size_t>(top_ref)]) top_ref = static_cast<int32_t>(i);
      }
      const double relerr = std::sqrt(diff / std::max(norm, 1e-30));
      const std::vector<int32_t> expected = entry.at(dtype).at("generated_ids");
      const std::vector<double> margins = entry.at(dtype).at("generated_margins");
      size_t first = 0;
      while (first < expected.size() && got.tokens[first] == expected[first]) ++first;
      const bool same = first == expected.size();
      const double margin = same ? 0.0 : margins[first];
      std::printf("%-8s %7zu %12.3e %12.3e %10s %14s %16s\n", case_name.c_str(), prompt.size(), relerr, worst,
                  top_got == top_ref ? "yes" : "no", same ? "none" : std::to_string(first).c_str(),
                  same ? "-" : std::to_string(margin).c_str());
      tally.check(relerr < 5e-2, std::string(name) + " " + case_name + ": logits relative error " +
                                     std::to_string(relerr) + " < 5e-2 vs transformers float32");
      tally.check(same || margin < 0.5, std::string(name) + " " + case_name + ": greedy tokens " +
                                            (same ? "identical for 32"
                                                  : "part at step " + std::to_string(first) +
                                                        " at a transformers margin of " + std::to_string(margin)));
      if (case_name == "chat") chat_logits[name] = got.last_prompt_logits;
    }
  }
  if (chat_logits.size() == 3) {
    const std::vector<float>& a = chat_logits["smollm2-bf16"];
    for (const char* other : {"smollm2-bf16.gguf", "smollm2-f32"}) {
      const std::vector<float>& b = chat_logits[other];
      tally.check(a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0,
                  std::string("bit-identical GPU logits: smollm2-bf16/ and ") + other);
    }
  }
  std::printf("hf: %d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 ? 0 : 1;
}

}  // namespace folio::e2e
