// Writes the GGUF fuzzer's seed corpus (fuzz/corpus/gguf/): a few tiny valid files that between
// them use every value type, nested arrays (up to the depth limit), versions 2 and 3, a custom
// alignment and every tensor type. Regenerate with:
//   g++ -std=c++20 -Isrc -Itests fuzz/make_gguf_seeds.cpp src/core/dtype.cpp -o /tmp/seeds
//   /tmp/seeds fuzz/corpus/gguf
#include <cstdio>
#include <fstream>
#include <string>

#include "model/gguf_test_writer.h"

using folio::DType;
using folio::gguf_test::ByteWriter;
using folio::gguf_test::GgufTestWriter;
namespace gt = folio::gguf_test::gguf_type;

namespace {

void save(const std::string& dir, const std::string& name, const GgufTestWriter& writer) {
  const std::vector<uint8_t> bytes = writer.build();
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s: %zu bytes\n", name.c_str(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];

  save(dir, "empty_v3.gguf", GgufTestWriter(3));

  GgufTestWriter values(3);
  values.add_u8("u8", 1)
      .add_i8("i8", -1)
      .add_u16("u16", 2)
      .add_i16("i16", -2)
      .add_u32("u32", 3)
      .add_i32("i32", -3)
      .add_u64("u64", 4)
      .add_i64("i64", -4)
      .add_f32("f32", 0.5f)
      .add_f64("f64", 0.25)
      .add_bool("bool", true)
      .add_string("string", "text")
      .add_string_array("strings", {"a", "bc", ""})
      .add_f32_array("floats", {1.0f, 2.0f})
      .add_i32_array("ints", {7, 8, 9});
  ByteWriter nested;  // [[1], [2, 3]] of uint16, and an array of arrays of strings
  nested.u32(gt::kArray).u64(2);
  nested.u32(gt::kUint16).u64(1).u16(1);
  nested.u32(gt::kUint16).u64(2).u16(2).u16(3);
  values.add_raw("nested", gt::kArray, nested);
  ByteWriter nested_strings;
  nested_strings.u32(gt::kArray).u64(1).u32(gt::kString).u64(2).str("x").str("yz");
  values.add_raw("nested_strings", gt::kArray, nested_strings);
  save(dir, "all_value_types_v3.gguf", values);

  GgufTestWriter deep(3);  // 8 nested arrays, the deepest the reader accepts
  ByteWriter deep_value;
  for (int level = 1; level < 8; ++level) deep_value.u32(gt::kArray).u64(1);
  deep_value.u32(gt::kInt8).u64(2).i8(1).i8(2);
  deep.add_raw("deep", gt::kArray, deep_value);
  save(dir, "nested_arrays_depth_8_v3.gguf", deep);

  GgufTestWriter llama(3);
  llama.add_string("general.architecture", "llama")
      .add_u32("llama.block_count", 1)
      .add_u32("llama.embedding_length", 32)
      .add_u32("llama.attention.head_count", 2)
      .add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .add_string("tokenizer.ggml.model", "gpt2")
      .add_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "a", "b", "ab"})
      .add_string_array("tokenizer.ggml.merges", {"a b"})
      .add_i32_array("tokenizer.ggml.token_type", {3, 3, 1, 1, 1});
  llama.add_tensor("token_embd.weight", {32, 5}, DType::Q8_0)
      .add_tensor("blk.0.attn_norm.weight", {32}, DType::F32)
      .add_tensor("blk.0.attn_q.weight", {32, 32}, DType::Q4_0)
      .add_tensor("output_norm.weight", {32}, DType::F16);
  save(dir, "tiny_llama_v3.gguf", llama);

  GgufTestWriter aligned(2);
  aligned.set_alignment(64).add_string("general.name", "aligned");
  aligned.add_tensor("a", {3}, DType::F32).add_tensor("b", {2, 2, 2, 2}, DType::BF16);
  save(dir, "alignment_64_v2.gguf", aligned);

  GgufTestWriter types(3);
  types.set_alignment(8);
  for (DType type :
       {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
        DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
    const uint64_t row = static_cast<uint64_t>(folio::dtype_info(type).block_elems);
    types.add_tensor(std::string(folio::dtype_name(type)), {row}, type);
  }
  save(dir, "every_tensor_type_v3.gguf", types);
  return 0;
}
