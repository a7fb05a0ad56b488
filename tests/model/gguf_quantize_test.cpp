// folio quantize's GGUF side (model/gguf_quantize.h): which type each tensor gets under the
// recipes, and a quantized file that keeps the input's metadata and tensors (types changed,
// values within the type's error) and refuses to stack quantizations.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <variant>

#include "model/gguf_file.h"
#include "model/gguf_quantize.h"
#include "model/synth_model.h"
#include "quant/formats.h"

namespace folio {
namespace {

GgufTensorInfo matrix(const std::string& name, int64_t cols, int64_t rows = 64) {
  GgufTensorInfo t;
  t.name = name;
  t.dims = {cols, rows};
  t.type = DType::F16;
  return t;
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const GgufArray* x = a.as_array()) {
    const GgufArray* y = b.as_array();
    if (x->element_type != y->element_type || x->items.size() != y->items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i) {
      if (!same_value(x->items[i], y->items[i])) return false;
    }
    return true;
  }
  if (const std::string* x = a.as_string()) return *x == *b.as_string();
  if (a.type == GgufValueType::FLOAT32 || a.type == GgufValueType::FLOAT64) return a.as_float() == b.as_float();
  if (std::holds_alternative<uint64_t>(a.data)) return std::get<uint64_t>(a.data) == std::get<uint64_t>(b.data);
  return std::get<int64_t>(a.data) == std::get<int64_t>(b.data);
}

TEST(GgufQuantizeTest, MixedRecipeWidensTheHeadAndSomeLayers) {
  const QuantizeRecipe q4km = quantize_recipe("q4_k_m").value();
  const int32_t layers = 32;  // more bits: layers 0-3, 28-31, and 6, 9, ..., 27 between
  EXPECT_EQ(quantized_type(q4km, matrix("output.weight", 4096), layers), DType::Q6_K);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.0.attn_v.weight", 4096), layers), DType::Q6_K);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.5.attn_v.weight", 4096), layers), DType::Q4_K);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.6.ffn_down.weight", 14336), layers), DType::Q6_K);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.29.ffn_down.weight", 14336), layers), DType::Q6_K);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.6.attn_q.weight", 4096), layers), DType::Q4_K);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.10.ffn_gate.weight", 4096), layers), DType::Q4_K);
  // Rows that are not 256 wide take a 32-element type with at least the bits.
  EXPECT_EQ(quantized_type(q4km, matrix("blk.10.ffn_gate.weight", 576), layers), DType::Q5_0);
  EXPECT_EQ(quantized_type(q4km, matrix("blk.0.attn_v.weight", 576), layers), DType::Q8_0);
  GgufTensorInfo norm;
  norm.name = "blk.0.attn_norm.weight";
  norm.dims = {4096};
  EXPECT_FALSE(quantized_type(q4km, norm, layers).has_value());
  const QuantizeRecipe q8 = quantize_recipe("q8_0").value();
  EXPECT_EQ(quantized_type(q8, matrix("output.weight", 4096), layers), DType::Q8_0);
  EXPECT_FALSE(quantize_recipe("q3_k_xs"));
}

TEST(GgufQuantizeTest, QuantizedFileKeepsMetadataAndValues) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "folio_quantize_test";
  std::filesystem::create_directories(dir);
  const std::string f16 = (dir / "tiny-f16.gguf").string(), q8 = (dir / "tiny-q8.gguf").string();
  ASSERT_TRUE(write_synth_model(synth_config("tiny").value(), SynthOptions{DType::F16, 3, 0}, f16));
  const GgufFile in = GgufFile::open(f16).value();
  ASSERT_TRUE(quantize_gguf(in, q8, quantize_recipe("q8_0").value()));
  const GgufFile out = GgufFile::open(q8).value();
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == "general.alignment") continue;
    const GgufValue* copied = out.find(key);
    ASSERT_NE(copied, nullptr) << key;
    EXPECT_TRUE(same_value(*copied, value)) << key;
  }
  EXPECT_EQ(out.get_int("general.file_type"), 7);
  ASSERT_EQ(out.tensors().size(), in.tensors().size());
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const GgufTensorInfo& a = in.tensors()[i];
    const GgufTensorInfo& b = out.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dims, b.dims);
    EXPECT_EQ(b.type, a.dims.size() == 2 ? DType::Q8_0 : a.type) << a.name;
    // Q8_0 keeps every value within half a step of its block (max |x| / 127, the step stored in
    // fp16: up to 2^-11 off, which the block maximum feels 127 times over).
    const int64_t cols = a.dims[0], rows = static_cast<int64_t>(a.num_elements) / cols;
    std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; r += std::max<int64_t>(1, rows / 7)) {
      ASSERT_TRUE(quant::dequantize_row(a.type, in.tensor_data(a) + r * row_bytes(a.type, cols), x.data(), cols));
      ASSERT_TRUE(quant::dequantize_row(b.type, out.tensor_data(b) + r * row_bytes(b.type, cols), y.data(), cols));
      for (int64_t c = 0; c < cols; c += 32) {
        float amax = 0.0f;
        for (int64_t j = c; j < std::min(cols, c + 32); ++j) amax = std::max(amax, std::fabs(x[j]));
        for (int64_t j = c; j < std::min(cols, c + 32); ++j) {
          ASSERT_LE(std::fabs(x[j] - y[j]), amax / 127.0f * 0.57f + 1e-6f) << a.name << " row " << r << " col " << j;
        }
      }
    }
  }
  // Quantizing the Q8_0 file again is refused before anything is written.
  const std::string again = (dir / "tiny-q4.gguf").string();
  Status s = quantize_gguf(out, again, quantize_recipe("q4_0").value());
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("already Q8_0"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(again));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace folio
