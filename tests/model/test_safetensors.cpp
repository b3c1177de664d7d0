// Safetensors reader: reliability cases T01-T06 on hand-built files, the two fixtures accepted,
// unaligned data copied correctly, sharded checkpoints through the index.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <set>

#include "model/model_files_util.h"
#include "model/safetensors.h"
#include "util/fs.h"

using namespace frost::model;
using namespace frost::testing;

namespace {

// Parses in-memory bytes; returns the error message ("" on success).
std::string parse_error(const std::string& bytes, SafetensorsHeader* h = nullptr) {
    SafetensorsHeader local;
    frost_status s = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.safetensors",
                                              h ? h : &local);
    if (s == FROST_OK) return "";
    EXPECT_EQ(s, FROST_ERR_CORRUPT);
    return frost_last_error();
}

std::string with_header(const std::string& json, const std::string& data) { return safetensors_bytes(json, data); }

std::vector<RawTensor> two_tensors() {
    return {{"a", "BF16", {2, 3}, random_bytes(12)}, {"b", "F32", {4}, random_bytes(16)}};
}

#define EXPECT_ERR(bytes, needle)                                               \
    do {                                                                        \
        std::string e_ = parse_error(bytes);                                    \
        EXPECT_NE(e_.find(needle), std::string::npos) << "error was: " << e_;   \
        EXPECT_NE(e_.find("t.safetensors"), std::string::npos) << e_;           \
    } while (0)

}  // namespace

TEST(Safetensors, ValidFileParses) {
    auto ts = two_tensors();
    SafetensorsHeader h;
    ASSERT_EQ(parse_error(safetensors_bytes(ts), &h), "");
    ASSERT_EQ(h.entries.size(), 2u);
    EXPECT_EQ(h.metadata.at("format"), "pt");
    EXPECT_EQ(h.entries[0].dtype, DType::BF16);
    EXPECT_EQ(h.entries[1].shape, (std::vector<int64_t>{4}));
}

TEST(Safetensors, T01HeaderLength) {
    std::string big(8, '\0');
    uint64_t n = kSafetensorsMaxHeader + 1;
    for (int i = 0; i < 8; ++i) big[size_t(i)] = char(n >> (8 * i));
    EXPECT_ERR(big + "{}", "header too large");
    std::string overflow(8, '\xff');  // N = 2^64-1: N + 8 would wrap
    EXPECT_ERR(overflow + "{}", "header too large");
    std::string past = safetensors_bytes("{}", "");
    past[0] = 100;  // N = 100 > file size
    EXPECT_ERR(past, "bad length");
    EXPECT_ERR(std::string("\x02\x00\x00", 3), "bad length");  // shorter than the length field
}

TEST(Safetensors, T02HeaderJson) {
    EXPECT_ERR(with_header(" {}", ""), "does not start with '{'");
    EXPECT_ERR(with_header("[]", ""), "does not start with '{'");
    EXPECT_ERR(with_header("{\"a\":", ""), "not valid JSON");
    EXPECT_ERR(with_header("{\"\xff\xfe\":{}}", ""), "not valid JSON/UTF-8");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "xy"),
               "duplicate key 'a'");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"), "duplicate key 'dtype'");
    EXPECT_ERR(with_header(R"({"__metadata__":{"format":1}})", ""), "__metadata__ value for 'format' is not a string");
    EXPECT_ERR(with_header(R"({"__metadata__":[]})", ""), "__metadata__ is not an object");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}})", "x"), "nests deeper");
}

TEST(Safetensors, T03Tiling) {
    const std::string data = random_bytes(8);
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", data.substr(0, 6)),
               "overlaps tensor 'a'");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})", data),
               "tensor 'b': gap of 2 bytes");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", data.substr(0, 4)), "tensor 'a': gap");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})", data.substr(0, 4)), "tensor 'a': data_offsets end 0 < begin 4");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", data.substr(0, 5)), "tensor 'a': data_offsets end 8 is past");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", data), "4 trailing bytes");
    // Offsets in a different order from the JSON keys are normal (keys are sorted when saved).
    EXPECT_EQ(parse_error(with_header(R"({"z":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", data)), "");
}

TEST(Safetensors, T04ShapesAndDtypes) {
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,1]}})", "x"), "shape product overflows");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,1]}})", "x"), "overflows 64 bits");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", "abcd"), "needs 6");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,1]}})", "x"), "unknown dtype 'Q4_K'");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "x"), "non-negative");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "x"), "data_offsets");
    EXPECT_ERR(with_header(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})", "x"), "unknown field 'extra'");
}

TEST(Safetensors, T05UnalignedDataIsCopiedCorrectly) {
    // An even header length and a 3-byte first tensor put "bf" and "f" at odd file offsets.
    std::vector<RawTensor> ts = {{"u8", "U8", {3}, random_bytes(3)}, {"bf", "BF16", {5}, random_bytes(10)},
                                 {"f", "F32", {3}, random_bytes(12)}};
    std::string header = header_for(ts, 1);
    if (header.size() % 2 == 1) header += ' ';
    std::string data;
    for (auto& t : ts) data += t.data;
    std::string dir = make_temp_dir("st_align");
    write_bytes(dir + "/model.safetensors", safetensors_bytes(header, data));
    std::shared_ptr<Checkpoint> ck;
    ASSERT_EQ(Checkpoint::open_dir(dir, &ck), FROST_OK) << frost_last_error();
    for (const auto& t : ts) {
        const CheckpointTensor* c = ck->find(t.name);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(c->data) % dtype_size(c->dtype), 0u) << t.name;
        EXPECT_EQ(std::string(static_cast<const char*>(c->data), c->bytes), t.data) << t.name;
    }
    EXPECT_TRUE(ck->find("bf")->copied);
    EXPECT_TRUE(ck->find("f")->copied);
}

TEST(Safetensors, FixturesAccepted) {
    for (const char* name : {"qwen35-tiny-a", "qwen35-tiny-a-vl"}) {
        std::shared_ptr<Checkpoint> ck;
        ASSERT_EQ(Checkpoint::open_dir(fixture_dir(name), &ck), FROST_OK) << frost_last_error();
        const CheckpointTensor* head = ck->find("lm_head.weight");
        ASSERT_NE(head, nullptr);
        EXPECT_EQ(head->shape, (std::vector<int64_t>{2048, 128}));
        EXPECT_EQ(head->dtype, DType::BF16);
        EXPECT_EQ(ck->tensors().size(), std::string(name).find("-vl") != std::string::npos ? 77u : 56u);
    }
}

TEST(Safetensors, T06TruncatedAtManyCutPoints) {
    const std::string src = read_bytes(fixture_dir("qwen35-tiny-a") + "/model.safetensors");
    std::string dir = make_temp_dir("st_trunc");
    const std::string path = dir + "/model.safetensors";
    write_bytes(path, src);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(src[size_t(i)]);
    std::set<size_t> cuts = {0, 1, 7, 8, 9, size_t(8 + n / 2), size_t(8 + n - 1), size_t(8 + n), size_t(8 + n + 1), src.size() - 1};
    constexpr size_t kCutPoints = 64;
    for (size_t i = 0; cuts.size() < kCutPoints; ++i) cuts.insert(size_t((src.size() - 1) * (i * 7919 % 1000) / 1000));
    // Truncate one copy progressively, largest cut first, so each step is a real shrink.
    for (auto it = cuts.rbegin(); it != cuts.rend(); ++it) {
        ASSERT_EQ(truncate(path.c_str(), off_t(*it)), 0);
        std::shared_ptr<Checkpoint> ck;
        frost_status s = Checkpoint::open_dir(dir, &ck);
        ASSERT_NE(s, FROST_OK) << "cut at " << *it;
        std::string e = frost_last_error();
        EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
        EXPECT_TRUE(e.find("bad length") != std::string::npos || e.find("past the data region") != std::string::npos ||
                    e.find("shorter") != std::string::npos)
            << "cut " << *it << ": " << e;
    }
}

TEST(Safetensors, T06ShrunkAfterOpenIsDetected) {
    std::string dir = make_temp_dir("st_shrink");
    write_bytes(dir + "/model.safetensors", read_bytes(fixture_dir("qwen35-tiny-a") + "/model.safetensors"));
    std::shared_ptr<Checkpoint> ck;
    ASSERT_EQ(Checkpoint::open_dir(dir, &ck), FROST_OK) << frost_last_error();
    EXPECT_EQ(ck->check_intact(), FROST_OK);
    ASSERT_EQ(truncate((dir + "/model.safetensors").c_str(), 4096), 0);
    EXPECT_EQ(ck->check_intact(), FROST_ERR_IO);
    EXPECT_NE(std::string(frost_last_error()).find("changed size"), std::string::npos);
}

TEST(Safetensors, ShardedThroughIndex) {
    auto ts = two_tensors();
    std::string dir = make_temp_dir("st_shard");
    write_bytes(dir + "/s1.safetensors", safetensors_bytes({ts[0]}));
    write_bytes(dir + "/s2.safetensors", safetensors_bytes({ts[1]}));
    write_bytes(dir + "/model.safetensors.index.json", R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
    std::shared_ptr<Checkpoint> ck;
    ASSERT_EQ(Checkpoint::open_dir(dir, &ck), FROST_OK) << frost_last_error();
    EXPECT_EQ(ck->file_count(), 2u);
    EXPECT_EQ(std::string(static_cast<const char*>(ck->find("b")->data), 16), ts[1].data);

    write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"s2.safetensors","b":"s2.safetensors"}})");
    ASSERT_NE(Checkpoint::open_dir(dir, &ck), FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find("tensor 'a' is mapped to s2.safetensors but not found"), std::string::npos)
        << frost_last_error();
    write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"../s1.safetensors"}})");
    ASSERT_NE(Checkpoint::open_dir(dir, &ck), FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find("plain file name"), std::string::npos);
    write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"missing.safetensors"}})");
    ASSERT_NE(Checkpoint::open_dir(dir, &ck), FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find("missing.safetensors"), std::string::npos);
    // The same tensor in two shards is refused.
    write_bytes(dir + "/s2.safetensors", safetensors_bytes({ts[0]}));
    write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","x":"s2.safetensors"}})");
    ASSERT_NE(Checkpoint::open_dir(dir, &ck), FROST_OK);
    EXPECT_NE(std::string(frost_last_error()).find("also appears in"), std::string::npos) << frost_last_error();
}

TEST(Safetensors, SeedCorpusValidAcceptedBadRefused) {
    const std::string dir = std::string(FROST_SOURCE_DIR) + "/fuzz/corpus/safetensors";
    std::vector<std::string> names;
    std::string err;
    ASSERT_TRUE(frost::util::list_dir(dir, &names, &err)) << err;
    ASSERT_GE(names.size(), 10u);
    for (const auto& n : names) {
        std::string e = parse_error(read_bytes(dir + "/" + n));
        if (n.rfind("valid_", 0) == 0) EXPECT_EQ(e, "") << n;
        else EXPECT_NE(e, "") << n;
    }
}
