// AWQ, GPTQ and FP8 directories (scripts/hf_quantized_test_models.py: the default model's layers
// quantized to 4 bits and packed in AutoAWQ's and AutoGPTQ's layouts, or to E4M3 with scales as
// llm-compressor writes them, with the dequantized values beside them in float32). Every
// repacked layer must hold those values (up to the fp16 rounding of the Q4_1 min; act-order
// layers with their columns where input_order says), the AWQ and GPTQ packings of the same
// values must compute the same logits bit for bit, and the 4-bit models (act-order's gathering
// its inputs) must still be the models they quantize. The configuration readers' errors are
// checked on their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "engine/sequence_runner.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/hf_fp8.h"
#include "model/hf_quantization.h"
#include "model/model_weights.h"
#include "model/safetensors_file.h"
#include "quant/formats.h"
#include "quant/int4_groups.h"
#include "support/cpu_engine.h"
#include "support/test_paths.h"

namespace folio {
namespace {

std::string hf_dir(const std::string& name) {
  return testing::models_dir() + "/hf/" + name;
}

struct Loaded {
  std::unique_ptr<HfCheckpoint> checkpoint;
  std::unique_ptr<ModelWeights> weights;
  HfModelConfig config;
};

Loaded load(const std::string& dir) {
  Loaded m;
  Expected<HfModelConfig> config = read_hf_config(dir);
  EXPECT_TRUE(config) << config.error();
  if (!config) return m;
  m.config = *config;
  Expected<HfCheckpoint> checkpoint = HfCheckpoint::open(dir);
  EXPECT_TRUE(checkpoint) << checkpoint.error();
  if (!checkpoint) return m;
  m.checkpoint = std::make_unique<HfCheckpoint>(std::move(checkpoint).value());
  Expected<std::unique_ptr<ModelWeights>> weights = ModelWeights::load_hf(*m.checkpoint, *config);
  EXPECT_TRUE(weights) << weights.error();
  if (weights) m.weights = std::move(weights).value();
  return m;
}

std::vector<float> last_logits(const ModelWeights& weights, const std::vector<int32_t>& prompt) {
  cpu::CpuBackend backend(2, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  const int32_t room = static_cast<int32_t>(prompt.size()) + 16;
  const auto executor = testing::sequence_executor(weights, backend, room);
  SequenceRunner runner(*executor, room);
  Expected<std::vector<float>> logits = runner.append(prompt);
  EXPECT_TRUE(logits) << logits.error();
  return logits ? *logits : std::vector<float>{};
}

std::vector<int32_t> golden_prompt(const char* name) {
  const nlohmann::json golden =
      nlohmann::json::parse(testing::read_file(testing::source_dir() + "/tests/golden/hf/smollm2/golden.json"));
  return golden.at("cases").at(name).at("prompt_ids");
}

struct Case {
  const char* dir;
  const char* reference;  // prefix of its layers in smollm2-int4-reference/layers.safetensors
  DType type;             // what the loader makes of its layers
  const char* method;
  bool act_order = false;  // columns stored by group (WeightTensor::input_order)
};

class HfQuantizedDir : public ::testing::TestWithParam<Case> {};

TEST_P(HfQuantizedDir, LayersHoldTheDequantizedValues) {
  const Case c = GetParam();
  const std::string dir = hf_dir(c.dir);
  if (!std::filesystem::exists(dir + "/config.json")) {
    GTEST_FAIL() << "missing " << dir << ": run scripts/hf_quantized_test_models.py (make test does)";
  }
  Loaded m = load(dir);
  ASSERT_TRUE(m.weights);
  EXPECT_NE(m.config.quantization.description.find(c.method), std::string::npos) << m.config.quantization.description;
  Expected<SafetensorsFile> reference = SafetensorsFile::open(hf_dir("smollm2-int4-reference") + "/layers.safetensors");
  ASSERT_TRUE(reference) << reference.error();
  const ModelConfig& mc = m.weights->config();
  double worst = 0.0;
  int64_t checked = 0;
  for (size_t layer = 0; layer < m.weights->layers().size(); ++layer) {
    const LayerWeights& lw = m.weights->layers()[layer];
    const struct {
      const WeightTensor* w;
      const char* name;
      int32_t heads;  // Q / K: the loader put rows in computing order
    } parts[] = {{&lw.q, "self_attn.q_proj", mc.num_heads},
                 {&lw.k, "self_attn.k_proj", mc.num_kv_heads},
                 {&lw.v, "self_attn.v_proj", 0},
                 {&lw.o, "self_attn.o_proj", 0},
                 {&lw.gate, "mlp.gate_proj", 0},
                 {&lw.up, "mlp.up_proj", 0},
                 {&lw.down, "mlp.down_proj", 0}};
    for (const auto& part : parts) {
      const std::string name = std::string(c.reference) + ".model.layers." + std::to_string(layer) + "." + part.name;
      const SafetensorsTensor* t = reference->find(name);
      if (t == nullptr && std::string(c.reference) == "fp8") continue;  // values of layers 0 and 29 only
      ASSERT_NE(t, nullptr) << name;
      ASSERT_EQ(part.w->type, c.type) << name;
      ASSERT_EQ(part.w->interleave_heads, 0) << name;
      ASSERT_EQ(part.w->input_order != nullptr, c.act_order) << name;
      const std::span<const uint8_t> bytes = reference->data(*t);
      WeightTensor order;
      order.rows = part.w->rows;
      order.interleave_heads = part.heads;
      std::vector<float> got(static_cast<size_t>(part.w->cols)), want(got.size()), stored(got.size());
      for (int64_t r = 0; r < part.w->rows; ++r) {
        ASSERT_TRUE(quant::dequantize_row(part.w->type, part.w->row(r), stored.data(), part.w->cols));
        for (int64_t col = 0; col < part.w->cols; ++col) {
          got[static_cast<size_t>(part.w->input_order ? part.w->input_order[col] : col)] =
              stored[static_cast<size_t>(col)];
        }
        std::memcpy(want.data(), bytes.data() + order.stored_row(r) * part.w->cols * 4, want.size() * 4);
        float scale = 0.0f;
        for (float v : want) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < got.size(); ++i) {
          const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
          worst = std::max(worst, error / std::max(scale, 1e-12f));
          // fp16 rounding of the min (Q4_1) or of the weight (F16): 2^-11 of the row's range;
          // BF16 (FP8 decoded): half a BF16 step of the weight itself.
          const double bound = c.type == DType::BF16 ? 0x1p-8 * std::fabs(want[i]) + 1e-12 : 1e-3 * scale + 1e-9;
          ASSERT_LE(error, bound) << name << " row " << r << " column " << i;
        }
        ++checked;
      }
    }
  }
  std::printf("[%s] %lld rows, worst |repacked - dequantized| / row max = %.2e\n", c.dir,
              static_cast<long long>(checked), worst);
  if (!c.act_order) return;
  // One gather for the matrices that read one input: the script gives Q, K, V one order and
  // gate, up another in every layer but the last, whose seven orders all differ.
  const std::vector<LayerWeights>& layers = m.weights->layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& w = layers[l];
    const bool shared = l + 1 < layers.size();
    EXPECT_EQ(w.q.input_order == w.k.input_order && w.k.input_order == w.v.input_order, shared) << "layer " << l;
    EXPECT_EQ(w.gate.input_order == w.up.input_order, shared) << "layer " << l;
    EXPECT_NE(w.q.input_order, w.gate.input_order) << "layer " << l;
  }
}

INSTANTIATE_TEST_SUITE_P(Directories, HfQuantizedDir,
                         ::testing::Values(Case{"smollm2-awq", "asym", DType::Q4_1, "awq 4-bit g64"},
                                           Case{"smollm2-gptq", "asym", DType::Q4_1, "gptq 4-bit g64 asym"},
                                           Case{"smollm2-gptq-actorder", "actorder", DType::Q4_1,
                                                "gptq 4-bit g64 sym act-order", true},
                                           Case{"smollm2-fp8", "fp8", DType::BF16, "compressed-tensors e4m3"}),
                         [](const auto& info) {
                           std::string name = info.param.dir;
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

// A 4-bit model against the float32 model of its values: 16 greedy steps equal (the CPU
// computes Q4_1 here with float activations, so only the fp16 rounding of each block's min
// separates them), logits close. Returns the largest logit difference.
double follow_float_model(const ModelWeights& quantized_weights, const ModelWeights& float_weights,
                          const std::vector<int32_t>& prompt) {
  cpu::CpuBackend backend(2, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  constexpr int kSteps = 16;
  const int32_t room = static_cast<int32_t>(prompt.size()) + kSteps + 1;
  const auto quantized_executor = testing::sequence_executor(quantized_weights, backend, room);
  const auto float_executor = testing::sequence_executor(float_weights, backend, room);
  SequenceRunner quantized(*quantized_executor, room), reference(*float_executor, room);
  Expected<std::vector<float>> q = quantized.append(prompt), f = reference.append(prompt);
  EXPECT_TRUE(q && f);
  if (!q || !f) return INFINITY;
  double worst = 0.0;
  for (int step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < q->size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>((*q)[i]) - (*f)[i]));
    const int32_t want = static_cast<int32_t>(std::max_element(f->begin(), f->end()) - f->begin());
    EXPECT_EQ(std::max_element(q->begin(), q->end()) - q->begin(), want) << "greedy step " << step;
    if (std::max_element(q->begin(), q->end()) - q->begin() != want) return INFINITY;
    const int32_t next[1] = {want};
    q = quantized.append(next);
    f = reference.append(next);
    EXPECT_TRUE(q && f);
    if (!q || !f) return INFINITY;
  }
  return worst;
}

// Every 4-bit layer carries its checkpoint's group width (WeightTensor::group_cols), and what it
// promises holds: each group's 32-column blocks share one (d, m), so the GPU's INT4 layout keeps
// one word a group (quant/int4_groups.h refuses a row otherwise).
void expect_checkpoint_groups(const ModelWeights& weights, int32_t group_cols) {
  int checked = 0;
  for (const LayerWeights& l : weights.layers()) {
    for (const WeightTensor* t : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
      if (t->type != DType::Q4_1) continue;
      EXPECT_EQ(t->group_cols, group_cols);
      std::vector<uint8_t> codes(static_cast<size_t>(t->cols / 2));
      std::vector<uint32_t> groups(static_cast<size_t>(t->cols / group_cols));
      for (int64_t r = 0; r < t->rows; ++r) {
        ASSERT_TRUE(quant::repack_int4_row(DType::Q4_1, t->row(r), t->cols, codes.data(), groups.data(), group_cols))
            << "row " << r;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// AWQ's and GPTQ's packings of the same 4-bit values are two independent unpackers landing on
// the same Q4_1 blocks: the same logits, bit for bit; and those are the logits of the same
// values as a float32 model, greedy tokens included.
TEST(HfQuantizedModel, AwqAndGptqComputeTheDequantizedModel) {
  for (const char* name : {"smollm2-awq", "smollm2-gptq", "smollm2-awq-dequantized"}) {
    if (!std::filesystem::exists(hf_dir(name) + "/config.json")) GTEST_FAIL() << "missing " << hf_dir(name);
  }
  const std::vector<int32_t> prompt = golden_prompt("plain");
  Loaded awq = load(hf_dir("smollm2-awq")), gptq = load(hf_dir("smollm2-gptq"));
  Loaded f32 = load(hf_dir("smollm2-awq-dequantized"));
  ASSERT_TRUE(awq.weights && gptq.weights && f32.weights);
  expect_checkpoint_groups(*awq.weights, 64);  // scripts/hf_quantized_test_models.py's GROUP
  expect_checkpoint_groups(*gptq.weights, 64);
  const std::vector<float> a = last_logits(*awq.weights, prompt), g = last_logits(*gptq.weights, prompt);
  ASSERT_EQ(a.size(), g.size());
  EXPECT_EQ(std::memcmp(a.data(), g.data(), a.size() * sizeof(float)), 0) << "AWQ and GPTQ logits differ";
  const double worst = follow_float_model(*awq.weights, *f32.weights, prompt);
  std::printf("[smollm2-awq] 16 greedy steps equal; logits max |awq - its float32 values| = %.2e\n", worst);
  // Each block's min -s * z rounded to fp16 (up to 2^-11 of s * z, the same for all 32 weights
  // of the block): measured 0.06 on logits spanning ~40; a wrong nibble order gives whole units.
  EXPECT_LT(worst, 0.15);
}

// Act-order GPTQ, its columns stored by group and its inputs gathered into that order before
// each matmul (shared orders gathered once, the last layer's seven orders one by one), on the
// quantized activations' kernels as the CPU runs it and on float activations: the float32
// model of its values, greedy tokens included. A gather in the wrong direction (stored column
// c reading input c, or input order[c] written to c) scrambles every layer's inputs.
TEST(HfQuantizedModel, GptqActOrderComputesItsDequantizedModel) {
  for (const char* name : {"smollm2-gptq-actorder", "smollm2-gptq-actorder-dequantized"}) {
    if (!std::filesystem::exists(hf_dir(name) + "/config.json")) GTEST_FAIL() << "missing " << hf_dir(name);
  }
  const std::vector<int32_t> prompt = golden_prompt("plain");
  Loaded act = load(hf_dir("smollm2-gptq-actorder")), f32 = load(hf_dir("smollm2-gptq-actorder-dequantized"));
  ASSERT_TRUE(act.weights && f32.weights);
  expect_checkpoint_groups(*act.weights, 64);  // every act-order group holds exactly 64 inputs
  const double worst = follow_float_model(*act.weights, *f32.weights, prompt);
  std::printf("[smollm2-gptq-actorder] 16 greedy steps equal; logits max |act-order - its float32 values| = %.2e\n",
              worst);
  EXPECT_LT(worst, 0.15);
  // The default kernels (8-bit activations, the panels where the ISA has them) on the same
  // gathered inputs: the next token of the prompt as the float32 model's.
  cpu::CpuBackend backend(2);
  const int32_t room = static_cast<int32_t>(prompt.size()) + 2;
  const auto executor = testing::sequence_executor(*act.weights, backend, room);
  SequenceRunner runner(*executor, room);
  Expected<std::vector<float>> got = runner.append(prompt);
  ASSERT_TRUE(got) << got.error();
  const std::vector<float> want = last_logits(*f32.weights, prompt);
  EXPECT_EQ(std::max_element(got->begin(), got->end()) - got->begin(),
            std::max_element(want.begin(), want.end()) - want.begin());
  double diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::fabs(static_cast<double>((*got)[i]) - want[i]));
  std::printf("[smollm2-gptq-actorder] quantized activations: next-token logits max diff %.3f\n", diff);
  EXPECT_LT(diff, 1.5);
}

// The FP8 directory (per-tensor, per-row and per-block scales) is still the model: the next
// token of two prompts as the float32 directory's, logits close (E4M3 keeps 3 mantissa bits).
TEST(HfQuantizedModel, Fp8DirectoryStaysTheModel) {
  for (const char* name : {"smollm2-fp8", "smollm2-f32"}) {
    if (!std::filesystem::exists(hf_dir(name) + "/config.json")) GTEST_FAIL() << "missing " << hf_dir(name);
  }
  Loaded fp8 = load(hf_dir("smollm2-fp8")), f32 = load(hf_dir("smollm2-f32"));
  ASSERT_TRUE(fp8.weights && f32.weights);
  EXPECT_EQ(fp8.config.quantization.method, HfQuantization::Method::kFp8);
  for (const char* prompt_name : {"plain", "chat"}) {
    const std::vector<int32_t> prompt = golden_prompt(prompt_name);
    const std::vector<float> a = last_logits(*fp8.weights, prompt), f = last_logits(*f32.weights, prompt);
    ASSERT_EQ(a.size(), f.size());
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff += (static_cast<double>(a[i]) - f[i]) * (static_cast<double>(a[i]) - f[i]);
      norm += static_cast<double>(f[i]) * f[i];
    }
    const double relative = std::sqrt(diff / norm);
    std::printf("[smollm2-fp8 %s] last logits |fp8 - float32| / |float32| = %.3f\n", prompt_name, relative);
    EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(), std::max_element(f.begin(), f.end()) - f.begin())
        << prompt_name;
    EXPECT_LT(relative, 0.25) << prompt_name;
  }
}

// A one-layer GPTQ checkpoint written by hand (16 outputs, 64 inputs): tensors as given, each
// filled with one repeated 32-bit word.
struct HandTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint32_t fill;
};
std::string write_checkpoint(const std::string& name, const std::vector<HandTensor>& tensors) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::create_directories(dir);
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const HandTensor& t : tensors) {
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    const size_t bytes = static_cast<size_t>(count) * (t.dtype == "F16" || t.dtype == "BF16" ? 2 : 4);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes}}};
    for (size_t b = 0; b < bytes; b += 4) {
      for (size_t j = 0; j < 4 && b + j < bytes; ++j) data.push_back(static_cast<uint8_t>(t.fill >> (8 * j)));
    }
  }
  const std::string text = header.dump();
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << text;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return dir;
}

TEST(HfQuantizedLayer, UnpacksByHandAndNamesBrokenTensors) {
  HfQuantization gptq;
  gptq.method = HfQuantization::Method::kGptq;
  gptq.group_size = 32;
  gptq.description = "gptq 4-bit g32";
  const std::string p = "model.layers.0.mlp.down_proj";
  // Every weight nibble 3, every stored zero 7 (v1: zero 8), every scale 1.0: w = 1 * (3 - 8).
  const HandTensor qweight{p + ".qweight", "I32", {8, 16}, 0x33333333u};
  const HandTensor qzeros{p + ".qzeros", "I32", {2, 2}, 0x77777777u};
  const HandTensor scales{p + ".scales", "F16", {2, 16}, 0x3c003c00u};
  const HandTensor g_idx{p + ".g_idx", "I32", {64}, 0u};
  struct Case {
    const char* name;
    std::vector<HandTensor> tensors;
    int32_t group_size;
    const char* error;  // null: loads
  };
  const Case cases[] = {
      {"valid", {qweight, qzeros, scales, g_idx}, 32, nullptr},
      {"one_group",
       {qweight, {p + ".qzeros", "I32", {1, 2}, 0x77777777u}, {p + ".scales", "F16", {1, 16}, 0x3c003c00u}},
       -1,
       nullptr},
      {"transposed", {{p + ".qweight", "I32", {16, 8}, 0u}, qzeros, scales}, 32, "implies [8, 16] I32"},
      {"bf16_scales", {qweight, qzeros, {p + ".scales", "BF16", {2, 16}, 0u}}, 32, "dtype BF16"},
      {"no_scales", {qweight, qzeros}, 32, "'model.layers.0.mlp.down_proj.scales' is missing"},
      {"bad_group", {qweight, qzeros, scales, {p + ".g_idx", "I32", {64}, 5u}}, 32, "names group 5 of 2"},
  };
  for (const Case& c : cases) {
    const std::string dir = write_checkpoint(std::string("folio_gptq_") + c.name, c.tensors);
    Expected<HfCheckpoint> checkpoint = HfCheckpoint::open(dir);
    ASSERT_TRUE(checkpoint) << c.name << ": " << checkpoint.error();
    HfQuantization q = gptq;
    q.group_size = c.group_size;
    std::vector<std::vector<uint8_t>> owned;
    Expected<WeightTensor> w = load_hf_quantized_layer(*checkpoint, q, p, 16, 64, 0, owned);
    if (c.error == nullptr) {
      ASSERT_TRUE(w) << c.name << ": " << w.error();
      EXPECT_EQ(w->type, DType::Q4_1);
      EXPECT_EQ(w->group_cols, c.group_size == -1 ? 64 : c.group_size) << c.name;
      std::vector<float> row(64);
      for (int64_t r = 0; r < 16; ++r) {
        ASSERT_TRUE(quant::dequantize_row(w->type, w->row(r), row.data(), 64));
        for (float v : row) ASSERT_EQ(v, -5.0f) << c.name << " row " << r;
      }
    } else {
      ASSERT_FALSE(w) << c.name;
      EXPECT_NE(w.error().find(c.error), std::string::npos) << c.name << ": " << w.error();
    }
    std::filesystem::remove_all(dir);
  }
}

Expected<HfQuantization> parse(const std::string& quantization_config) {
  return read_hf_quantization("", "{\"quantization_config\": " + quantization_config + "}");
}

TEST(HfQuantizationConfig, ReadsAwqAndGptqAndNamesWhatItRefuses) {
  Expected<HfQuantization> awq = parse(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"})");
  ASSERT_TRUE(awq) << awq.error();
  EXPECT_EQ(awq->method, HfQuantization::Method::kAwq);
  EXPECT_EQ(awq->group_size, 128);
  Expected<HfQuantization> gptq =
      parse(R"({"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": true, "sym": false,
                "checkpoint_format": "gptq_v2"})");
  ASSERT_TRUE(gptq) << gptq.error();
  EXPECT_EQ(gptq->group_size, -1);
  EXPECT_TRUE(gptq->desc_act);
  EXPECT_FALSE(gptq->sym);
  EXPECT_FALSE(gptq->zero_offset);
  Expected<HfQuantization> fp8 =
      parse(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [64, 64]})");
  ASSERT_TRUE(fp8) << fp8.error();
  EXPECT_EQ(fp8->method, HfQuantization::Method::kFp8);
  EXPECT_EQ(fp8->block_size, 64);
  const std::pair<const char*, const char*> refused[] = {
      {R"({"quant_method": "compressed-tensors", "format": "pack-quantized"})", "'pack-quantized' is not supported"},
      {R"({"quant_method": "fp8", "weight_block_size": [128, 64]})", "weight_block_size must be [B, B]"},
      {R"({"quant_method": "gptq", "bits": 8, "group_size": 128})", "8-bit"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})", "version 'gemv'"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 48})", "group_size 48"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})", "without zero points"},
      {R"({"quant_method": "bitsandbytes", "load_in_4bit": true})", "'bitsandbytes'"},
      {R"({"quant_method": "gptq", "bits": "4"})", "must be an integer"}};
  for (const auto& [config, message] : refused) {
    Expected<HfQuantization> q = parse(config);
    ASSERT_FALSE(q) << config;
    EXPECT_NE(q.error().find(message), std::string::npos) << q.error();
  }
  Expected<HfQuantization> none = read_hf_quantization("", R"({"hidden_size": 8})");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->method, HfQuantization::Method::kNone);
}

TEST(HfQuantizationConfig, ReadsAutoAwqSideFile) {
  const std::string dir = ::testing::TempDir() + "/folio_awq_side_file";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/quant_config.json")
      << R"({"zero_point": true, "q_group_size": 64, "w_bit": 4, "version": "GEMM"})";
  Expected<HfQuantization> q = read_hf_quantization(dir, "{}");
  ASSERT_TRUE(q) << q.error();
  EXPECT_EQ(q->method, HfQuantization::Method::kAwq);
  EXPECT_EQ(q->group_size, 64);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace folio
