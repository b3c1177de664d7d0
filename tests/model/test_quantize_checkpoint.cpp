// `frost quantize` (model/quant/quantize_checkpoint.h) under injected I/O faults: failing the N-th
// I/O call, once or from then on, for every N the run makes, must fail with FROST_ERR_IO and leave
// the output folder as it was (a new folder removed, an existing one holding only the user's own
// files, no ".partial" left), so a retry succeeds; and with nothing armed the result loads as a
// quantized checkpoint whose plan binds every module written. The format checks (independent numpy
// decoder, rounding bounds, copies) are in tests/tools/test_quantize.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/quant/quantize_checkpoint.h"
#include "model/weights.h"
#include "model_files_util.h"
#include "util/fs.h"

namespace frost::testing {
namespace {

namespace fq = frost::model::quant;

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> names;
    std::string err;
    if (!util::list_dir(dir, &names, &err)) return {};
    return names;
}

fq::QuantizeOptions options(const std::string& src, const std::string& out, const std::string& format) {
    fq::QuantizeOptions o;
    o.model_dir = src;
    o.out_dir = out;
    o.format = format;
    o.threads = 2;
    o.shard_bytes = 400000;  // several shards and an index: more write points
    return o;
}

// The I/O calls of one run, counted by the gate: most are tensor writes of one kind, so the test
// fails the first and last 24 (headers, first tensors; index, copied files, config, renames) and
// every 16th between.
std::vector<uint64_t> fault_points(const fq::QuantizeOptions& o) {
    frost_fault_clear();
    const std::string out = make_temp_dir("quantize_count") + "/q";
    fq::QuantizeOptions c = o;
    c.out_dir = out;
    if (fq::quantize_checkpoint(c) != FROST_OK) return {};
    const uint64_t total = frost_fault_calls(FROST_FAULT_IO);
    std::vector<uint64_t> at;
    for (uint64_t n = 1; n <= total; ++n)
        if (n <= 24 || n + 24 > total || n % 16 == 0) at.push_back(n);
    return at;
}

TEST(QuantizeCheckpoint, EveryInjectedIoFaultLeavesTheFolderAsItWas) {
    const std::string src = fixture_dir("moe-tiny-a");
    const std::vector<uint64_t> points = fault_points(options(src, "", "fp8"));
    ASSERT_GT(points.size(), 40u) << frost_last_error();  // shards, index, copied files, config: many write points
    for (const int persistent : {0, 1}) {
        for (const uint64_t nth : points) {
            const std::string root = make_temp_dir("quantize_fault");
            const std::string fresh = root + "/fresh", existing = root + "/existing";
            std::string err;
            ASSERT_TRUE(util::make_dirs(existing, &err)) << err;
            write_bytes(existing + "/notes.txt", "the user's own file");
            for (const std::string& out : {fresh, existing}) {
                frost_fault_arm(FROST_FAULT_IO, nth, persistent);
                const frost_status s = fq::quantize_checkpoint(options(src, out, "fp8"));
                const std::string msg = s == FROST_OK ? "" : frost_last_error();
                frost_fault_clear();
                ASSERT_EQ(s, FROST_ERR_IO) << "fault at I/O call " << nth << " (persistent " << persistent << "): " << msg;
                EXPECT_NE(msg.find("injected"), std::string::npos) << msg;
                if (out == fresh) {
                    EXPECT_FALSE(util::file_exists(fresh)) << "fault at " << nth << " left the new folder behind";
                } else {
                    EXPECT_EQ(entries(existing), std::vector<std::string>{"notes.txt"}) << "fault at " << nth;
                    EXPECT_EQ(read_bytes(existing + "/notes.txt"), "the user's own file");
                }
                if (nth % 4 != 1) continue;  // the retry, with nothing armed, succeeds in the same place
                ASSERT_EQ(fq::quantize_checkpoint(options(src, out, "fp8")), FROST_OK) << frost_last_error();
            }
        }
    }
}

TEST(QuantizeCheckpoint, TheResultLoadsQuantized) {
    const std::string out = make_temp_dir("quantize_load") + "/q";
    fq::QuantizeSummary sum;
    ASSERT_EQ(fq::quantize_checkpoint(options(fixture_dir("qwen35-tiny-a"), out, "int4"), &sum), FROST_OK) << frost_last_error();
    EXPECT_EQ(sum.quantized, 25u);  // every projection of the 4 layers but the 6 GDN gates and the LM head
    EXPECT_EQ(sum.kept, 7u);
    EXPECT_GT(sum.shards, 1u);
    EXPECT_LT(sum.bytes_out, sum.bytes_in);
    model::ModelWeights w;
    ASSERT_EQ(model::load_weights(out, &w), FROST_OK) << frost_last_error();
    // a second run into the finished folder is refused and changes nothing
    const auto before = entries(out);
    EXPECT_EQ(fq::quantize_checkpoint(options(fixture_dir("qwen35-tiny-a"), out, "int4")), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("already holds a checkpoint"), std::string::npos);
    EXPECT_EQ(entries(out), before);
}

}  // namespace
}  // namespace frost::testing
