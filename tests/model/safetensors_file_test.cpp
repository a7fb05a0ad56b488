// The safetensors reader on files the `safetensors` library wrote (the tiny test directories)
// and on hand-made headers breaking each rule the reader enforces: every error names where.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/safetensors_file.h"
#include "support/test_paths.h"

namespace folio {
namespace {

// A file: 8-byte little-endian header length, the header, then `data_bytes` bytes.
std::vector<uint8_t> file_with(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(i);
  return out;
}

std::string parse_error(const std::string& header, size_t data_bytes) {
  const std::vector<uint8_t> bytes = file_with(header, data_bytes);
  Expected<SafetensorsFile> f = SafetensorsFile::parse(bytes, "t.safetensors");
  return f ? std::string() : f.error();
}

TEST(SafetensorsFile, ReadsWhatTheLibraryWrote) {
  const std::string path = testing::source_dir() + "/tests/golden/hf/tiny-qwen2/model.safetensors";
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f) << f.error();
  const SafetensorsTensor* embed = f->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{320, 64}));
  EXPECT_EQ(embed->num_bytes(), 320u * 64u * 2u);
  EXPECT_EQ(f->data(*embed).size(), embed->num_bytes());
  const SafetensorsTensor* bias = f->find("model.layers.0.self_attn.q_proj.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  uint64_t covered = 0;
  for (const SafetensorsTensor& t : f->tensors()) covered += t.num_bytes();
  EXPECT_GT(covered, 100000u);
}

TEST(SafetensorsFile, ParsesAValidHeader) {
  const std::vector<uint8_t> bytes = file_with(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"I8","shape":[0],"data_offsets":[12,12]}})",
      12);
  Expected<SafetensorsFile> f = SafetensorsFile::parse(bytes);
  ASSERT_TRUE(f) << f.error();
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensors()[0].name, "a");  // in data order
  EXPECT_EQ(f->data(*f->find("b"))[0], 8);
}

TEST(SafetensorsFile, RefusesBrokenHeadersNamingWhere) {
  const char* ok_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    std::string header;
    size_t data;
    const char* message;
  };
  const Case cases[] = {
      {std::string("{") + ok_a + "}", 4, "do not fit"},  // data shorter than the ranges
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "elements of"},
      {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'Q4'"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "tensor 'b'"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "belong to no tensor"},  // a hole
      {std::string("{") + ok_a + "," + ok_a + "}", 8, "named twice"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8, "overflows"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8, "unknown field 'extra'"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "non-negative"},
      {R"({"a": )", 8, "not valid JSON"},
      {R"([1,2])", 0, "not a JSON object"},
  };
  for (const Case& c : cases) {
    const std::string error = parse_error(c.header, c.data);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.header << "\n  -> " << error;
    EXPECT_NE(error.find("t.safetensors"), std::string::npos) << error;
  }
  // A header length past the end of the file.
  std::vector<uint8_t> bytes = file_with("{}", 0);
  bytes[0] = 0xFF;
  Expected<SafetensorsFile> f = SafetensorsFile::parse(bytes, "t.safetensors");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("header length"), std::string::npos) << f.error();
  EXPECT_FALSE(SafetensorsFile::parse(std::vector<uint8_t>(5, 0)));
}

}  // namespace
}  // namespace folio
