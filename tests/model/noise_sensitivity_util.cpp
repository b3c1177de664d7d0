#include "model/noise_sensitivity_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/model_files_util.h"

namespace frost::test {

std::vector<float> cpu_prompt_logits(const std::string& dir, const std::vector<int32_t>& prompt) {
    model::EngineOptions o;
    o.prefill_chunk = int((prompt.size() + 63) / 64 * 64);  // one step: every row's logits at once
    o.max_seq_len = o.prefill_chunk + 64;
    o.logits_all = true;
    std::unique_ptr<model::Engine> e;
    std::vector<float> logits;
    EXPECT_EQ(model::Engine::create(dir, o, &e), FROST_OK) << frost_last_error();
    if (!e) return logits;
    int32_t next = -1;
    EXPECT_EQ(e->prefill(0, prompt.data(), prompt.size(), &next, &logits), FROST_OK) << frost_last_error();
    return logits;
}

NoiseSensitivity prompt_noise_sensitivity(const std::string& dir, const std::vector<int32_t>& prompt,
                                          const std::vector<float>& ref_logits, int draws, uint64_t seed) {
    NoiseSensitivity s;
    const size_t n = prompt.size();
    if (n == 0 || ref_logits.size() % n) {
        ADD_FAILURE() << "reference logits [" << ref_logits.size() << "] are not [" << n << ", V]";
        return s;
    }
    const size_t V = ref_logits.size() / n;
    s.rel.assign(n, 0.0);
    s.top1_kept.assign(n, true);
    const std::vector<testing::RawTensor> original = testing::read_tensors(dir + "/model.safetensors");
    for (int d = 0; d < draws; ++d) {
        std::vector<testing::RawTensor> t = original;
        std::mt19937_64 rng(seed * 1000003u + uint64_t(d));
        size_t flipped = 0;
        for (auto& x : t) {
            if (x.dtype != "BF16") continue;
            // Little-endian bf16: the low byte's bit 0 is the last mantissa bit.
            for (size_t i = 0; i + 1 < x.data.size(); i += 2)
                if (rng() & 1) {
                    x.data[i] = char(uint8_t(x.data[i]) ^ 1u);
                    ++flipped;
                }
        }
        EXPECT_GT(flipped, 0u) << "no bf16 tensor in " << dir;
        const std::string copy = testing::make_temp_dir("noise_sensitivity");
        testing::copy_config(dir, copy);
        testing::write_bytes(copy + "/model.safetensors", testing::safetensors_bytes(t));
        const std::vector<float> l = cpu_prompt_logits(copy, prompt);
        if (l.size() != ref_logits.size()) {
            ADD_FAILURE() << "perturbed run gave " << l.size() << " logits, expected " << ref_logits.size();
            return s;
        }
        for (size_t p = 0; p < n; ++p) {
            s.rel[p] = std::max(s.rel[p], rel_l2(l.data() + p * V, ref_logits.data() + p * V, V));
            int top = -1, mine = -2;
            margin_of(ref_logits.data() + p * V, V, &top);
            margin_of(l.data() + p * V, V, &mine);
            if (mine != top) s.top1_kept[p] = false;
        }
    }
    return s;
}

}  // namespace frost::test
