// EngineOptions::leave_out_ops, the timing probe behind `frost bench engine --leave-out`: ops whose
// label contains a listed part are recorded but not launched (their outputs stay as they were),
// every other op runs, a part that matches no op of a step is refused at create, and numerics()
// (hence the deployment fingerprint) names the probe.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "model/engine.h"
#include "model/engine_test_util.h"

namespace frost::model {
namespace {

frost_status make(const std::vector<std::string>& leave_out, std::unique_ptr<Engine>* e) {
    EngineOptions o;
    o.max_seq_len = 256;
    o.prefill_chunk = 64;
    o.leave_out_ops = leave_out;
    return Engine::create(test::fixture_dir("qwen35-tiny-a"), o, e);
}

std::vector<int32_t> prompt() {
    test::Golden g;
    std::string err;
    EXPECT_TRUE(test::load_golden(test::fixture_dir("qwen35-tiny-a"), &g, &err)) << err;
    return g.prompt_ids;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EngineLeaveOut, LeftOutOpsDoNotRunAndTheRestDoes) {
    const auto p = prompt();
    std::unique_ptr<Engine> full, probe;
    ASSERT_EQ(make({}, &full), FROST_OK) << frost_last_error();
    ASSERT_EQ(make({"gemm lm_head"}, &probe), FROST_OK) << frost_last_error();
    std::vector<float> full_before, probe_before, full_after, probe_after;
    ASSERT_EQ(full->last_logits(0, &full_before), FROST_OK);
    ASSERT_EQ(probe->last_logits(0, &probe_before), FROST_OK);
    int32_t t_full = -1, t_probe = -1;
    ASSERT_EQ(full->prefill(0, p.data(), p.size(), &t_full), FROST_OK) << frost_last_error();
    ASSERT_EQ(probe->prefill(0, p.data(), p.size(), &t_probe), FROST_OK) << frost_last_error();
    ASSERT_EQ(full->last_logits(0, &full_after), FROST_OK);
    ASSERT_EQ(probe->last_logits(0, &probe_after), FROST_OK);
    EXPECT_FALSE(same_bits(full_before, full_after)) << "the lm_head of the full engine wrote no logits";
    EXPECT_TRUE(same_bits(probe_before, probe_after)) << "the left-out lm_head wrote the logits";
    // A decode step: still no logits from the probe, and the rest of the step ran (the state moved).
    ASSERT_EQ(probe->decode(0, &t_probe), FROST_OK) << frost_last_error();
    ASSERT_EQ(probe->last_logits(0, &probe_after), FROST_OK);
    EXPECT_TRUE(same_bits(probe_before, probe_after));
    EXPECT_NE(full->numerics(), probe->numerics());
    EXPECT_NE(probe->numerics().find("leave_out=gemm lm_head"), std::string::npos) << probe->numerics();
    EXPECT_EQ(full->numerics().find("leave_out"), std::string::npos);
}

TEST(EngineLeaveOut, APartMatchingNoOpIsRefusedAtCreate) {
    std::unique_ptr<Engine> e;
    EXPECT_NE(make({"rmsnorm", "no such op"}, &e), FROST_OK);
    const std::string err = frost_last_error();
    EXPECT_NE(err.find("\"no such op\" matches no op"), std::string::npos) << err;
    EXPECT_NE(err.find("gemm lm_head"), std::string::npos) << err;  // the message lists the labels
    EXPECT_NE(make({""}, &e), FROST_OK);                              // an empty part matches nothing
}

// The cursor ops hold the step's position and token count; a step without them addressed the KV
// cache past its end on the GPU. Refused by exact label and by any part that matches one.
TEST(EngineLeaveOut, CursorOpsAreRefused) {
    // The prefill tail's row op writes the tail's cursor (forward.cpp): refused alike.
    for (const char* part : {"=cursor decode_begin", "cursor advance", "cursor", "advance", "tail row"}) {
        std::unique_ptr<Engine> e;
        EXPECT_NE(make({"rmsnorm", part}, &e), FROST_OK) << part;
        const std::string err = frost_last_error();
        EXPECT_NE(err.find("a cursor op"), std::string::npos) << part << ": " << err;
        EXPECT_EQ(e, nullptr);
    }
    std::unique_ptr<Engine> e;  // every other label still can be
    EXPECT_EQ(make({"=sample", "=embed"}, &e), FROST_OK) << frost_last_error();
}

}  // namespace
}  // namespace frost::model
