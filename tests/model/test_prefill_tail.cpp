// The prefill tail (qwen35 StepSpec::tail, EngineOptions::prefill_tail): a prefill whose logits
// are its last row's runs the last layer, past its state-writing ops, on that row alone. Against an
// engine with the tail off, on fresh random prompts over one and two prefill chunks:
// - the session state (GDN conv and recurrent state, KV cache) is the same bit for bit;
// - the last row's logits are the same: bit for bit on the CPU, whose kernels compute a row the
//   same way whatever rows share the launch; on CUDA within bf16 rounding (the tail's one row runs
//   on the decode kernels: GEMVs, decode attention, the MoE decode);
// - the greedy decode that follows is the same (bit for bit where the first token agrees: the
//   state it starts from is).
// The last layer is a GDN layer (a 3-layer cut), an attention layer (4 layers) or an MoE layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "model/capsule_test_util.h"
#include "model/engine.h"
#include "model/model_files_util.h"
#include "model/synth.h"

namespace frost::model {
namespace {

struct Shape {
    const char* name;
    const char* cpu_preset;
    const char* gpu_preset;
    int layers;
};

const Shape kShapes[] = {
    {"gdn_last", "tiny", "tiny-gpu", 3},
    {"attention_last", "tiny", "tiny-gpu", 4},
    {"moe_attention_last", "moe-tiny", "moe-tiny-gpu", 4},
    {"moe_gdn_last", "moe-tiny", "moe-tiny-gpu", 3},
};

const std::string& model_dir(const Shape& s, frost_backend b) {
    static std::map<std::string, std::string> dirs;
    const std::string preset = b == FROST_BACKEND_CUDA ? s.gpu_preset : s.cpu_preset;
    const std::string key = preset + ":" + std::to_string(s.layers);
    auto it = dirs.find(key);
    if (it != dirs.end()) return it->second;
    SynthOptions o;
    o.out_dir = frost::testing::make_temp_dir("prefill_tail");
    o.preset = preset;
    o.layers = s.layers;
    o.vocab = test::kCapsuleVocab;
    o.seed = 777;
    o.decisive_router = std::string(preset).find("moe") != std::string::npos;
    EXPECT_EQ(synth_checkpoint(o), FROST_OK) << frost_last_error();
    return dirs[key] = o.out_dir;
}

std::unique_ptr<Engine> make(const std::string& dir, frost_backend b, bool tail) {
    EngineOptions o;
    o.backend = b;
    o.max_seq_len = test::kCapsuleMaxSeq;
    o.prefill_chunk = test::kCapsuleChunk;
    o.prefill_tail = tail;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    return e;
}

// The state without the cursor (whose last_token is the sampled token, compared on its own).
std::vector<std::pair<std::string, std::vector<uint8_t>>> state_of(Engine& e) {
    auto s = test::live_state(e, 0);
    s.erase(std::remove_if(s.begin(), s.end(), [](const auto& p) { return p.first.find("cursor") != std::string::npos; }),
            s.end());
    return s;
}

class PrefillTail : public ::testing::TestWithParam<std::tuple<frost_backend, int>> {};

TEST_P(PrefillTail, SameStateAndLastLogitsAsEveryRow) {
    const frost_backend b = std::get<0>(GetParam());
    const Shape& shape = kShapes[std::get<1>(GetParam())];
    const std::string& dir = model_dir(shape, b);
    auto on = make(dir, b, true), off = make(dir, b, false);
    ASSERT_TRUE(on && off);
    ASSERT_EQ(on->config().is_linear(on->config().num_layers - 1), shape.layers == 3);
    // The tail is named in the numerics only where it changes bits (CUDA).
    EXPECT_EQ(on->numerics().find("prefill_tail"), std::string::npos);
    EXPECT_EQ(off->numerics().find("prefill_tail=off") != std::string::npos, b == FROST_BACKEND_CUDA);
    std::mt19937_64 rng(std::random_device{}());
    // One chunk (a partial bucket, a full one) and two chunks (C_p = 128).
    const int lengths[] = {int(2 + rng() % 60), 64, int(129 + rng() % 120)};
    for (int n : lengths) {
        SCOPED_TRACE("prompt " + std::to_string(n));
        const auto ids = test::random_ids(size_t(n), rng());
        int32_t t_on = -1, t_off = -1;
        ASSERT_EQ(on->reset(0), FROST_OK);
        ASSERT_EQ(off->reset(0), FROST_OK);
        ASSERT_EQ(on->prefill(0, ids.data(), ids.size(), &t_on), FROST_OK) << frost_last_error();
        ASSERT_EQ(off->prefill(0, ids.data(), ids.size(), &t_off), FROST_OK) << frost_last_error();
        EXPECT_TRUE(state_of(*on) == state_of(*off)) << "the tail changed the session state";
        std::vector<float> l_on, l_off;
        ASSERT_EQ(on->last_logits(0, &l_on), FROST_OK);
        ASSERT_EQ(off->last_logits(0, &l_off), FROST_OK);
        ASSERT_EQ(l_on.size(), l_off.size());
        double scale = 0, diff = 0;
        for (size_t i = 0; i < l_on.size(); ++i) {
            scale = std::max(scale, double(std::fabs(l_off[i])));
            diff = std::max(diff, double(std::fabs(l_on[i] - l_off[i])));
        }
        ASSERT_GT(scale, 0.0);
        if (b == FROST_BACKEND_CPU) {
            EXPECT_EQ(diff, 0.0);
            EXPECT_EQ(t_on, t_off);
        } else {
            EXPECT_LE(diff, 0.03 * scale) << "max |logit| " << scale;
        }
        if (t_on != t_off) continue;  // a near-tie at the last row (logged by the tolerance above)
        const auto c_on = test::continue_session(*on, 0, t_on, 6);
        const auto c_off = test::continue_session(*off, 0, t_off, 6);
        EXPECT_EQ(c_on.tokens, c_off.tokens);
        // From the first decode step on, both run the same graph from the same state.
        for (size_t i = 1; i < c_on.logits.size(); ++i) EXPECT_TRUE(c_on.logits[i] == c_off.logits[i]) << "step " << i;
    }
}

std::string label(const ::testing::TestParamInfo<std::tuple<frost_backend, int>>& info) {
    return std::string(std::get<0>(info.param) == FROST_BACKEND_CUDA ? "cuda_" : "cpu_") +
           kShapes[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillTail,
                         ::testing::Combine(::testing::ValuesIn(test::capsule_backends()),
                                            ::testing::Range(0, int(sizeof(kShapes) / sizeof(kShapes[0])))),
                         label);

}  // namespace
}  // namespace frost::model
