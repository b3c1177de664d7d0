// The batched-decode harness (batch_test_util.h).
#include "model/batch_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace frost::model::batch_test {

std::vector<uint8_t> state_bytes(const Engine& e, int s) {
    std::vector<uint8_t> out;
    for (const auto& b : e.state_buffers(s)) {
        const size_t n = b.role == BufferRole::Cursor ? sizeof(kernels::StepCursor) : b.valid_bytes(e.position(s));
        std::vector<uint8_t> host(n);
        frost_buffer* h = nullptr;
        EXPECT_EQ(frost_buffer_wrap(e.ctx(), "test.readback", host.data(), n, FROST_SPACE_HOST, &h), FROST_OK);
        EXPECT_EQ(frost_buffer_copy(h, 0, b.buf, 0, n, e.stream()), FROST_OK);
        EXPECT_EQ(frost_stream_sync(e.stream()), FROST_OK);
        frost_buffer_free(h);
        if (b.role == BufferRole::Cursor) {
            kernels::StepCursor c;
            std::memcpy(&c, host.data(), sizeof c);
            c.n_tokens = 0;
            c.steps = 0;  // graph steps differ: a prefill of n tokens is fewer steps than n feeds
            std::memcpy(host.data(), &c, sizeof c);
        }
        out.insert(out.end(), host.begin(), host.end());
    }
    return out;
}

Result solo(Engine& e, const Plan& p) {
    Result r;
    EXPECT_EQ(e.reset(0, p.sampling), FROST_OK) << frost_last_error();
    int32_t next = -1;
    EXPECT_EQ(e.prefill(0, p.prompt.data(), p.prompt.size(), &next), FROST_OK) << frost_last_error();
    r.tokens.push_back(next);
    while (int(r.tokens.size()) < p.tokens) {
        EXPECT_EQ(e.decode(0, &next), FROST_OK) << frost_last_error();
        r.tokens.push_back(next);
    }
    r.state = state_bytes(e, 0);
    return r;
}

std::vector<Result> batched(Engine& e, const std::vector<Plan>& plans, std::vector<int>* sizes) {
    const int S = int(plans.size());
    std::vector<Result> out(static_cast<size_t>(S));
    std::vector<char> joined(static_cast<size_t>(S), 0);
    for (int t = 0;; ++t) {
        for (int s = 0; s < S; ++s) {
            if (joined[size_t(s)] || plans[size_t(s)].join != t) continue;
            EXPECT_EQ(e.reset(s, plans[size_t(s)].sampling), FROST_OK) << frost_last_error();
            int32_t next = -1;
            EXPECT_EQ(e.prefill(s, plans[size_t(s)].prompt.data(), plans[size_t(s)].prompt.size(), &next), FROST_OK)
                << frost_last_error();
            out[size_t(s)].tokens.push_back(next);
            joined[size_t(s)] = 1;
        }
        std::vector<int> members;
        for (int s = 0; s < S; ++s)
            if (joined[size_t(s)] && int(out[size_t(s)].tokens.size()) < plans[size_t(s)].tokens) members.push_back(s);
        const bool pending = std::any_of(plans.begin(), plans.end(), [&](const Plan& p) { return p.join > t; });
        if (members.empty() && !pending) break;
        if (members.empty()) continue;
        std::shuffle(members.begin(), members.end(), std::mt19937(unsigned(t)));  // row order is not session order
        std::vector<int32_t> next(members.size(), -1);
        EXPECT_EQ(e.decode_batch(members.data(), int(members.size()), next.data()), FROST_OK) << frost_last_error();
        for (size_t i = 0; i < members.size(); ++i) out[size_t(members[i])].tokens.push_back(next[i]);
        if (sizes) sizes->push_back(int(members.size()));
    }
    for (int s = 0; s < S; ++s) out[size_t(s)].state = state_bytes(e, s);
    return out;
}

std::vector<Plan> random_plans(std::mt19937& rng, int S, int vocab, bool sampled, bool staggered) {
    std::vector<Plan> plans(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) {
        Plan& p = plans[size_t(s)];
        p.prompt.resize(size_t(std::uniform_int_distribution<int>(3, 90)(rng)));
        for (auto& id : p.prompt) id = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
        p.tokens = std::uniform_int_distribution<int>(staggered ? 2 : 12, 16)(rng);
        p.join = staggered ? std::uniform_int_distribution<int>(0, 8)(rng) : 0;
        if (sampled) {
            p.sampling.temperature = 0.9f;
            p.sampling.top_k = s % 2 ? 40 : 0;
            p.sampling.top_p = s % 3 ? 0.95f : 1.0f;
            p.sampling.seed = rng();
        }
    }
    return plans;
}

}  // namespace frost::model::batch_test
