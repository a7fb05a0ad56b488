#include "model/gguf_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "gguf_test_writer.h"  // tests/model/

namespace folio {
namespace {

using gguf_test::ByteWriter;
using gguf_test::GgufTestWriter;
namespace gt = gguf_test::gguf_type;

std::vector<uint8_t> floats_to_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Parses and expects failure; returns the message for checks.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  Expected<GgufFile> file = GgufFile::parse(bytes);
  EXPECT_FALSE(file.has_value()) << "expected the parse to fail";
  if (file.has_value()) return "";
  EXPECT_EQ(file.error().rfind("gguf: ", 0), 0u) << file.error();
  return file.error();
}

#define EXPECT_ERROR_HAS(message, part) EXPECT_NE((message).find(part), std::string::npos) << "message: " << (message)

// A small file that uses every value type, nested arrays and tensors of several types; its
// last byte is tensor data, so every strict prefix of it is invalid.
GgufTestWriter rich_writer(uint32_t version = 3) {
  GgufTestWriter writer(version);
  writer.add_string("general.architecture", "llama")
      .add_u8("test.u8", 200)
      .add_i8("test.i8", -100)
      .add_u16("test.u16", 60000)
      .add_i16("test.i16", -30000)
      .add_u32("test.u32", 4000000000u)
      .add_i32("test.i32", -2000000000)
      .add_u64("test.u64", std::numeric_limits<uint64_t>::max())
      .add_i64("test.i64", std::numeric_limits<int64_t>::min())
      .add_f32("test.f32", 1.5f)
      .add_f64("test.f64", -2.25)
      .add_bool("test.true", true)
      .add_bool("test.false", false)
      .add_string("test.empty", "")
      .add_string("test.utf8", std::string("h\xc3\xa9llo\0x", 8))
      .add_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "a", ""})
      .add_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, 2.5f})
      .add_i32_array("tokenizer.ggml.token_type", {1, 3, -1});
  ByteWriter nested;  // [[1, 2], [], [3]] as int32 arrays
  nested.u32(gt::kArray).u64(3);
  nested.u32(gt::kInt32).u64(2).i32(1).i32(2);
  nested.u32(gt::kInt32).u64(0);
  nested.u32(gt::kInt32).u64(1).i32(3);
  writer.add_raw("test.nested", gt::kArray, nested);
  writer.add_tensor(
      "token_embd.weight", {8, 3}, DType::F32,
      floats_to_bytes({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}));
  writer.add_tensor("blk.0.attn_q.weight", {32, 2}, DType::Q4_0);
  writer.add_tensor("blk.0.attn_norm.weight", {5}, DType::F16);
  writer.add_tensor("output.weight", {64, 1, 1, 2}, DType::Q8_0);
  return writer;
}

TEST(GgufFile, ReadsEveryScalarType) {
  const std::vector<uint8_t> bytes = rich_writer().build();
  Expected<GgufFile> parsed = GgufFile::parse(bytes);
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  const GgufFile& file = *parsed;

  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.file_size(), bytes.size());
  EXPECT_EQ(file.metadata().size(), 19u);
  EXPECT_EQ(file.get_int("test.u8"), 200);
  EXPECT_EQ(file.get_int("test.i8"), -100);
  EXPECT_EQ(file.get_int("test.u16"), 60000);
  EXPECT_EQ(file.get_int("test.i16"), -30000);
  EXPECT_EQ(file.get_int("test.u32"), 4000000000LL);
  EXPECT_EQ(file.get_int("test.i32"), -2000000000);
  EXPECT_EQ(file.get_int("test.i64"), std::numeric_limits<int64_t>::min());
  // A uint64 above INT64_MAX is not an int64, but is still a number.
  EXPECT_EQ(file.get_int("test.u64"), std::nullopt);
  EXPECT_EQ(file.get_float("test.u64"), 18446744073709551615.0);
  EXPECT_EQ(std::get<uint64_t>(file.find("test.u64")->data), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(file.get_float("test.f32"), 1.5);
  EXPECT_EQ(file.get_float("test.f64"), -2.25);
  EXPECT_EQ(file.get_float("test.i8"), -100.0);
  EXPECT_EQ(file.get_bool("test.true"), true);
  EXPECT_EQ(file.get_bool("test.false"), false);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_string("test.empty"), "");
  EXPECT_EQ(file.get_string("test.utf8"), std::string("h\xc3\xa9llo\0x", 8));

  EXPECT_EQ(file.find("test.u16")->type, GgufValueType::UINT16);
  EXPECT_EQ(file.find("test.i16")->type, GgufValueType::INT16);
  EXPECT_EQ(file.find("test.f32")->type, GgufValueType::FLOAT32);
  EXPECT_EQ(file.find("test.true")->type, GgufValueType::BOOL);
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(GgufFile, TypedGettersRefuseOtherTypes) {
  const std::vector<uint8_t> bytes = rich_writer().build();
  Expected<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->get_int("general.architecture"), std::nullopt);
  EXPECT_EQ(file->get_int("test.f32"), std::nullopt);
  EXPECT_EQ(file->get_int("test.true"), std::nullopt);
  EXPECT_EQ(file->get_bool("test.u8"), std::nullopt);
  EXPECT_EQ(file->get_string("test.u8"), std::nullopt);
  EXPECT_EQ(file->get_float("general.architecture"), std::nullopt);
  EXPECT_EQ(file->get_int("missing"), std::nullopt);
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.scores"), std::nullopt);
  EXPECT_EQ(file->get_float_array("tokenizer.ggml.tokens"), std::nullopt);
  EXPECT_EQ(file->get_int_array("tokenizer.ggml.scores"), std::nullopt);
  EXPECT_EQ(file->get_int_array("test.nested"), std::nullopt);
  EXPECT_EQ(file->get_string_array("test.u8"), std::nullopt);
  EXPECT_EQ(file->get_string_array("missing"), std::nullopt);
}

TEST(GgufFile, ReadsArraysAndNestedArrays) {
  const std::vector<uint8_t> bytes = rich_writer().build();
  Expected<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "</s>", "a", ""}));
  EXPECT_EQ(file->get_float_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.0f, 2.5f}));
  EXPECT_EQ(file->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 3, -1}));

  const GgufArray* outer = file->find("test.nested")->as_array();
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->element_type, GgufValueType::ARRAY);
  ASSERT_EQ(outer->items.size(), 3u);
  const std::vector<std::vector<int64_t>> expected = {{1, 2}, {}, {3}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const GgufArray* inner = outer->items[i].as_array();
    ASSERT_NE(inner, nullptr);
    EXPECT_EQ(inner->element_type, GgufValueType::INT32);
    ASSERT_EQ(inner->items.size(), expected[i].size());
    for (size_t j = 0; j < expected[i].size(); ++j) EXPECT_EQ(inner->items[j].as_int(), expected[i][j]);
  }
}

// release() forgets one entry (a session drops the vocabulary arrays once its tokenizer has
// them) and leaves the others alone; releasing a missing key is a no-op.
TEST(GgufFile, ReleaseForgetsOneEntry) {
  const std::vector<uint8_t> bytes = rich_writer().build();
  Expected<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  const size_t entries = file->metadata().size();
  file->release("tokenizer.ggml.tokens");
  EXPECT_EQ(file->find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens"), std::nullopt);
  EXPECT_EQ(file->metadata().size(), entries - 1);
  EXPECT_EQ(file->get_float_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.0f, 2.5f}));
  file->release("no.such.key");
  EXPECT_EQ(file->metadata().size(), entries - 1);
}

TEST(GgufFile, IntArrayWithHugeUnsignedIsNotAnIntArray) {
  ByteWriter value;
  value.u32(gt::kUint64).u64(2).u64(7).u64(std::numeric_limits<uint64_t>::max());
  ByteWriter small;
  small.u32(gt::kUint8).u64(3).u8(1).u8(2).u8(255);
  GgufTestWriter writer;
  writer.add_raw("big", gt::kArray, value).add_raw("small", gt::kArray, small);
  const std::vector<uint8_t> bytes = writer.build();
  Expected<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->get_int_array("big"), std::nullopt);
  EXPECT_EQ(file->get_int_array("small"), (std::vector<int64_t>{1, 2, 255}));
}

// Nests `levels` arrays: [[[...[int8 5]...]]].
ByteWriter nested_value(int levels) {
  ByteWriter value;
  for (int i = 1; i < levels; ++i) value.u32(gt::kArray).u64(1);
  value.u32(gt::kInt8).u64(1).i8(5);
  return value;
}

TEST(GgufFile, NestingDepthIsLimited) {
  GgufTestWriter ok_writer;
  ok_writer.add_raw("deep", gt::kArray, nested_value(8));
  const std::vector<uint8_t> ok_bytes = ok_writer.build();
  Expected<GgufFile> file = GgufFile::parse(ok_bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  const GgufValue* value = file->find("deep");
  for (int i = 0; i < 8; ++i) {
    ASSERT_NE(value->as_array(), nullptr);
    value = &value->as_array()->items.at(0);
  }
  EXPECT_EQ(value->as_int(), 5);

  GgufTestWriter deep_writer;
  deep_writer.add_raw("deep", gt::kArray, nested_value(9));
  const std::string message = parse_error(deep_writer.build());
  EXPECT_ERROR_HAS(message, "metadata key 'deep'");
  EXPECT_ERROR_HAS(message, "nested deeper than 8");
}

TEST(GgufFile, ReadsVersionsTwoAndThree) {
  for (uint32_t version : {2u, 3u}) {
    const std::vector<uint8_t> bytes = rich_writer(version).build();
    Expected<GgufFile> file = GgufFile::parse(bytes);
    ASSERT_TRUE(file.has_value()) << file.error();
    EXPECT_EQ(file->version(), version);
    EXPECT_EQ(file->tensors().size(), 4u);
    EXPECT_EQ(file->get_string("general.architecture"), "llama");
  }
}

TEST(GgufFile, TensorInfosAndDataPointers) {
  GgufTestWriter writer = rich_writer();
  const std::vector<uint8_t> bytes = writer.build();
  Expected<GgufFile> parsed = GgufFile::parse(bytes);
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  const GgufFile& file = *parsed;
  EXPECT_EQ(file.alignment(), 32u);
  ASSERT_EQ(file.tensors().size(), 4u);

  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(embd->type, DType::F32);
  EXPECT_EQ(embd->num_elements, 24u);
  EXPECT_EQ(embd->num_bytes, 96u);
  float third_row_first = 0;
  std::memcpy(&third_row_first, file.tensor_data(*embd) + 2 * 8 * sizeof(float), sizeof(float));
  EXPECT_EQ(third_row_first, 16.0f);

  const GgufTensorInfo* q = file.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::Q4_0);
  EXPECT_EQ(q->num_bytes, 2u * 18u);
  const GgufTensorInfo* norm = file.find_tensor("blk.0.attn_norm.weight");
  EXPECT_EQ(norm->num_bytes, 10u);
  const GgufTensorInfo* output = file.find_tensor("output.weight");
  EXPECT_EQ(output->dims, (std::vector<int64_t>{64, 1, 1, 2}));
  EXPECT_EQ(output->num_bytes, 4u * 34u);
  EXPECT_EQ(file.find_tensor("missing"), nullptr);

  // Every tensor's bytes are exactly what the writer put there, at an aligned file position.
  const std::vector<uint64_t> offsets = writer.tensor_offsets();
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const GgufTensorInfo& info = file.tensors()[i];
    EXPECT_EQ(info.name, writer.tensors()[i].name);
    EXPECT_EQ(info.offset, offsets[i]);
    const uint8_t* data = file.tensor_data(info);
    const size_t file_position = static_cast<size_t>(data - bytes.data());
    EXPECT_EQ(file_position % 32, 0u) << info.name;
    ASSERT_LE(file_position + info.num_bytes, bytes.size());
    EXPECT_EQ(std::vector<uint8_t>(data, data + info.num_bytes), writer.tensors()[i].data) << info.name;
  }
}

TEST(GgufFile, HonoursCustomAlignment) {
  for (uint32_t alignment : {1u, 8u, 64u, 256u}) {
    GgufTestWriter writer;
    writer.set_alignment(alignment);
    writer.add_tensor("a", {3}, DType::F32).add_tensor("b", {32}, DType::Q8_0);
    const std::vector<uint8_t> bytes = writer.build();
    Expected<GgufFile> file = GgufFile::parse(bytes);
    ASSERT_TRUE(file.has_value()) << file.error();
    EXPECT_EQ(file->alignment(), alignment);
    EXPECT_EQ(file->get_int("general.alignment"), alignment);
    for (size_t i = 0; i < 2; ++i) {
      const GgufTensorInfo& info = file->tensors()[i];
      const auto position = static_cast<size_t>(file->tensor_data(info) - bytes.data());
      EXPECT_EQ(position % alignment, 0u);
      EXPECT_EQ(std::vector<uint8_t>(file->tensor_data(info), file->tensor_data(info) + info.num_bytes),
                writer.tensors()[i].data);
    }
  }
}

TEST(GgufFile, AcceptsAlignmentOfAnyIntegerType) {
  GgufTestWriter writer;
  writer.add_u64("general.alignment", 16);
  const std::vector<uint8_t> bytes = writer.build();
  Expected<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->alignment(), 16u);
}

TEST(GgufFile, FileWithoutTensorsMayEndAfterMetadata) {
  GgufTestWriter writer;
  writer.add_u8("x", 1);  // 24 + 8 + 1 + 4 + 1 bytes: not a multiple of 32
  const std::vector<uint8_t> bytes = writer.build();
  Expected<GgufFile> file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_TRUE(file->tensors().empty());
}

// ---- rejection -----------------------------------------------------------------------------

TEST(GgufFileRejects, BadMagic) {
  std::vector<uint8_t> bytes = rich_writer().build();
  bytes[0] = 'X';
  const std::string message = parse_error(bytes);
  EXPECT_ERROR_HAS(message, "header at offset 0: bad magic 'XGUF'");
}

TEST(GgufFileRejects, VersionOneAndUnknownVersions) {
  EXPECT_ERROR_HAS(parse_error(rich_writer(1).build()), "header at offset 4: GGUF version 1 is not supported");
  EXPECT_ERROR_HAS(parse_error(rich_writer(4).build()), "unsupported GGUF version 4");
  EXPECT_ERROR_HAS(parse_error(rich_writer(0).build()), "unsupported GGUF version 0");
}

TEST(GgufFileRejects, BigEndianFiles) {
  std::vector<uint8_t> bytes = rich_writer().build();
  const uint8_t big_endian_three[4] = {0, 0, 0, 3};
  std::memcpy(bytes.data() + 4, big_endian_three, 4);
  EXPECT_ERROR_HAS(parse_error(bytes), "big-endian GGUF file");
}

TEST(GgufFileRejects, TruncationAtEveryByte) {
  const std::vector<uint8_t> bytes = rich_writer().build();
  ASSERT_TRUE(GgufFile::parse(bytes).has_value());
  for (size_t length = 0; length < bytes.size(); ++length) {
    // A copy of exactly `length` bytes, so the address sanitizer sees any read past it.
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(length));
    Expected<GgufFile> file = GgufFile::parse(prefix);
    ASSERT_FALSE(file.has_value()) << "a " << length << "-byte prefix parsed";
    ASSERT_EQ(file.error().rfind("gguf: ", 0), 0u) << file.error();
    ASSERT_NE(file.error().find(" at offset "), std::string::npos) << file.error();
  }
}

TEST(GgufFileRejects, CorruptedBytesNeverCrash) {
  // Not a correctness check: every single-byte corruption must parse or fail cleanly.
  const std::vector<uint8_t> bytes = rich_writer().build();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t replacement : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x7f}}) {
      std::vector<uint8_t> corrupted = bytes;
      corrupted[i] = replacement;
      Expected<GgufFile> file = GgufFile::parse(corrupted);
      if (!file.has_value()) continue;
      for (const GgufTensorInfo& info : file->tensors()) {
        ASSERT_LE(static_cast<size_t>(file->tensor_data(info) - corrupted.data()) + info.num_bytes, corrupted.size());
      }
    }
  }
}

TEST(GgufFileRejects, HugeStringLengths) {
  GgufTestWriter writer;
  ByteWriter value;
  value.u64(uint64_t{1} << 60).raw("abc", 3);
  writer.add_raw("text", gt::kString, value);
  const std::string message = parse_error(writer.build());
  EXPECT_ERROR_HAS(message,
                   "metadata key 'text' at offset 40: string value length 1152921504606846976 "
                   "exceeds the 3 bytes left");

  // A key whose own length is absurd.
  ByteWriter raw;
  raw.raw("GGUF", 4).u32(3).u64(0).u64(1).u64(~uint64_t{0}).raw("key and then some", 17);
  EXPECT_ERROR_HAS(parse_error(raw.bytes()), "metadata entry 0 at offset 24: key length");
}

TEST(GgufFileRejects, HugeCounts) {
  ByteWriter array;
  array.u32(gt::kUint32).u64(uint64_t{1} << 61).u32(1);
  GgufTestWriter writer;
  writer.add_raw("big", gt::kArray, array);
  EXPECT_ERROR_HAS(parse_error(writer.build()),
                   "metadata key 'big' at offset 43: array count 2305843009213693952 cannot fit");

  ByteWriter strings;  // each string needs at least its 8-byte length
  strings.u32(gt::kString).u64(4).u64(0).u64(0).u64(0);
  GgufTestWriter string_writer;
  string_writer.add_raw("s", gt::kArray, strings);
  EXPECT_ERROR_HAS(parse_error(string_writer.build()), "array count 4 cannot fit in the 24 bytes left");

  GgufTestWriter tensors;
  tensors.override_tensor_count(~uint64_t{0});
  EXPECT_ERROR_HAS(parse_error(tensors.build()), "header at offset 8: tensor count");
  GgufTestWriter keys;
  keys.add_u8("a", 1).override_metadata_count(uint64_t{1} << 40);
  EXPECT_ERROR_HAS(parse_error(keys.build()), "header at offset 16: metadata count 1099511627776 cannot fit");
}

TEST(GgufFileRejects, UnknownValueTypes) {
  GgufTestWriter writer;
  writer.add_u8("fine", 1).add_raw("odd", 13, ByteWriter().u32(0));
  EXPECT_ERROR_HAS(parse_error(writer.build()), "metadata key 'odd' at offset 52: unknown value type 13");

  GgufTestWriter array_writer;
  array_writer.add_raw("arr", gt::kArray, ByteWriter().u32(99).u64(0));
  EXPECT_ERROR_HAS(parse_error(array_writer.build()), "metadata key 'arr' at offset 39: unknown array element type 99");

  GgufTestWriter bool_writer;
  bool_writer.add_raw("flag", gt::kBool, ByteWriter().u8(2));
  EXPECT_ERROR_HAS(parse_error(bool_writer.build()), "bool value 2 is not 0 or 1");
}

TEST(GgufFileRejects, UnknownTensorType) {
  GgufTestWriter writer;
  writer.add_tensor({"blk.0.attn_q.weight", {32, 4}, 99, std::vector<uint8_t>(64), {}});
  // header 24, name 8 + 19, n_dims 4, dims 16: the type id sits at 71.
  EXPECT_ERROR_HAS(parse_error(writer.build()),
                   "gguf: tensor 'blk.0.attn_q.weight' info at offset 71: unknown type id 99");
}

TEST(GgufFileRejects, BadTensorShapes) {
  auto shape_error = [](std::vector<uint64_t> dims, DType type) {
    GgufTestWriter writer;
    writer.add_tensor({"t", std::move(dims), static_cast<uint32_t>(type), std::vector<uint8_t>(64), {}});
    return parse_error(writer.build());
  };
  EXPECT_ERROR_HAS(shape_error({}, DType::F32), "n_dims is 0, must be 1 to 4");
  EXPECT_ERROR_HAS(shape_error({1, 1, 1, 1, 1}, DType::F32), "n_dims is 5");
  EXPECT_ERROR_HAS(shape_error({4, 0}, DType::F32), "dims[1] is 0");
  EXPECT_ERROR_HAS(shape_error({uint64_t{1} << 32, uint64_t{1} << 32}, DType::F32),
                   "element count overflows at dims[1]");
  EXPECT_ERROR_HAS(shape_error({~uint64_t{0}}, DType::F32), "element count overflows at dims[0]");
  EXPECT_ERROR_HAS(shape_error({33, 2}, DType::Q4_0), "dims[0] = 33 is not a multiple of the Q4_0 block size 32");
  // Fits int64 in elements, but not in bytes.
  EXPECT_ERROR_HAS(shape_error({uint64_t{1} << 62}, DType::F32), "byte size overflows");
}

TEST(GgufFileRejects, MisalignedTensorOffset) {
  GgufTestWriter writer;
  writer.add_tensor({"w", {4}, static_cast<uint32_t>(DType::F32), std::vector<uint8_t>(16), 4});
  EXPECT_ERROR_HAS(parse_error(writer.build()),
                   "tensor 'w' info at offset 49: data offset 4 is not a multiple of the alignment 32");
}

TEST(GgufFileRejects, TensorPastEndOfFile) {
  GgufTestWriter short_data;
  short_data.add_tensor("a", {4}, DType::F32).add_tensor("w", {8}, DType::F32, std::vector<uint8_t>(31));
  EXPECT_ERROR_HAS(parse_error(short_data.build()), "tensor 'w' info at offset");
  EXPECT_ERROR_HAS(parse_error(short_data.build()), "data [32, 32 + 32) runs past the end of the file");

  GgufTestWriter far_offset;
  far_offset.add_tensor("a", {4}, DType::F32);
  far_offset.add_tensor({"w", {8}, static_cast<uint32_t>(DType::F32), {}, uint64_t{1} << 40});
  EXPECT_ERROR_HAS(parse_error(far_offset.build()), "runs past the end of the file");

  GgufTestWriter wrapping;  // offset + bytes would wrap around uint64
  wrapping.add_tensor({"w", {8}, static_cast<uint32_t>(DType::F32), {}, ~uint64_t{31}});
  EXPECT_ERROR_HAS(parse_error(wrapping.build()), "runs past the end of the file");
}

TEST(GgufFileRejects, DuplicateNamesAndKeys) {
  GgufTestWriter tensors;
  tensors.add_tensor("same", {4}, DType::F32).add_tensor("same", {4}, DType::F32);
  EXPECT_ERROR_HAS(parse_error(tensors.build()),
                   "tensor 'same' info at offset 60: duplicate tensor name (tensor 0 has it too)");

  GgufTestWriter keys;
  keys.add_u32("k", 1).add_string("k", "again");
  EXPECT_ERROR_HAS(parse_error(keys.build()), "metadata key 'k' at offset 41: duplicate key");
}

TEST(GgufFileRejects, BadAlignment) {
  for (int64_t alignment : {int64_t{0}, int64_t{3}, int64_t{48}, int64_t{-32}, int64_t{1} << 32}) {
    GgufTestWriter writer;
    writer.add_i64("general.alignment", alignment);
    const std::string message = parse_error(writer.build());
    EXPECT_ERROR_HAS(message,
                     "metadata key 'general.alignment' at offset 53: alignment must be a nonzero power of two");
  }
  GgufTestWriter text;
  text.add_string("general.alignment", "32");
  EXPECT_ERROR_HAS(parse_error(text.build()), "(got a non-integer)");
}

TEST(GgufFileRejects, EscapesUnprintableNames) {
  GgufTestWriter writer;
  writer.add_raw(std::string("bad\nkey'", 8), 42, ByteWriter());
  EXPECT_ERROR_HAS(parse_error(writer.build()), "metadata key 'bad\\x0akey\\x27'");
}

// ---- files on disk -------------------------------------------------------------------------

TEST(GgufFileOpen, MapsAFileAndOwnsTheMapping) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("folio_gguf_test_" + std::to_string(::getpid()) + ".gguf")).string();
  GgufTestWriter writer = rich_writer();
  const std::vector<uint8_t> bytes = writer.build();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  Expected<GgufFile> opened = GgufFile::open(path);
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  ASSERT_TRUE(opened.has_value()) << opened.error();
  GgufFile file = std::move(opened).value();  // moving keeps the mapping alive
  EXPECT_EQ(file.path(), path);
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(file.tensor_data(*embd), file.tensor_data(*embd) + embd->num_bytes),
            writer.tensors()[0].data);
}

TEST(GgufFileOpen, ReportsMissingAndBrokenFiles) {
  Expected<GgufFile> missing = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.has_value());
  EXPECT_ERROR_HAS(missing.error(), "cannot open '/nonexistent/model.gguf'");

  const std::string path =
      (std::filesystem::temp_directory_path() / ("folio_gguf_bad_" + std::to_string(::getpid()) + ".gguf")).string();
  { std::ofstream(path, std::ios::binary) << "GGUF"; }
  Expected<GgufFile> broken = GgufFile::open(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(broken.has_value());
  EXPECT_ERROR_HAS(broken.error(), "gguf: " + path + ": header at offset 4: file ends inside the version");
}

std::string models_dir() {
  if (const char* dir = std::getenv("FOLIO_MODELS_DIR"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/folio/models";
}

TEST(GgufFileOpen, RealSmolLM2Model) {
  const std::string path = models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) {
    FAIL() << "model file " << path << " is missing: run scripts/fetch-model "
           << "(or set FOLIO_MODELS_DIR to the folder that holds it)";
  }
  Expected<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->tensors().size(), 272u);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_int("llama.block_count"), 30);
  const GgufTensorInfo* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::Q8_0);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(embd->num_bytes, 576u / 32 * 34 * 49152);
  const std::optional<std::vector<std::string>> tokens = file->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 49152u);
  // The last tensor ends inside the file (the reader checked it; this checks the arithmetic).
  for (const GgufTensorInfo& info : file->tensors()) {
    ASSERT_LE(static_cast<uint64_t>(file->tensor_data(info) - file->tensor_data(file->tensors()[0])) + info.num_bytes,
              file->file_size());
  }
}

}  // namespace
}  // namespace folio
