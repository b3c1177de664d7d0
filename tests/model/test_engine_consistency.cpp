// Engine promises beyond the goldens: prefill bucket size C_p and token-by-token decode give the
// same greedy tokens; states on the 64 grid are bitwise equal whatever C_p (alignment unit 64);
// seeded sampling is reproducible with its RNG counter advancing in the cursor; steps never
// recapture a graph.
#include <gtest/gtest.h>

#include <cstring>

#include "model/engine.h"
#include "model/engine_test_util.h"
#include "model/generate.h"

namespace frost::model {
namespace {

std::unique_ptr<Engine> make(int chunk, bool logits_all = false) {
    EngineOptions o;
    o.max_seq_len = 320;
    o.prefill_chunk = chunk;
    o.logits_all = logits_all;
    std::unique_ptr<Engine> e;
    EXPECT_EQ(Engine::create(test::fixture_dir("qwen35-tiny-a"), o, &e), FROST_OK) << frost_last_error();
    return e;
}

std::vector<int32_t> prompt() {
    test::Golden g;
    std::string err;
    EXPECT_TRUE(test::load_golden(test::fixture_dir("qwen35-tiny-a"), &g, &err)) << err;
    return g.prompt_ids;
}

std::vector<int32_t> greedy(Engine& e, const std::vector<int32_t>& p, int n) {
    GenerateRequest r;
    r.prompt = p;
    r.max_new_tokens = n;
    GenerateResult res;
    EXPECT_EQ(generate(e, 0, r, &res), FROST_OK) << frost_last_error();
    return res.ids;
}

std::vector<uint8_t> state_bytes(const Engine& e, int64_t pos) {
    std::vector<uint8_t> out;
    for (const auto& b : e.state_buffers(0)) {
        const uint8_t* p = static_cast<const uint8_t*>(frost_buffer_ptr(b.buf));
        size_t n = b.valid_bytes(pos);
        if (b.role == BufferRole::Cursor) n = offsetof(kernels::StepCursor, n_tokens);  // position only
        out.insert(out.end(), p, p + n);
    }
    return out;
}

TEST(EngineConsistency, ChunkSizesAndTokenByTokenGiveSameGreedyTokens) {
    const auto p = prompt();
    auto e64 = make(64), e256 = make(256);
    ASSERT_TRUE(e64 && e256) << "engine on fixture qwen35-tiny-a failed to load";
    const auto a = greedy(*e64, p, 12), b = greedy(*e256, p, 12);
    EXPECT_EQ(a, b);
    // Token by token through the decode graph (recurrent GDN form).
    ASSERT_EQ(e64->reset(0), FROST_OK);
    int32_t next = -1;
    for (int32_t t : p) ASSERT_EQ(e64->feed(0, t, &next), FROST_OK) << frost_last_error();
    std::vector<int32_t> c{next};
    while (c.size() < a.size()) {
        ASSERT_EQ(e64->decode(0, &next), FROST_OK);
        c.push_back(next);
    }
    EXPECT_EQ(a, c);
}

TEST(EngineConsistency, StatesOnThe64GridAreBitwiseEqualAcrossChunkSizes) {
    const auto p = prompt();
    const int P = 192;  // multiple of 64
    auto e64 = make(64), e128 = make(128), e256 = make(256);
    ASSERT_TRUE(e64 && e128 && e256) << "engine on fixture qwen35-tiny-a failed to load";
    int32_t n1, n2, n3;
    ASSERT_EQ(e64->prefill(0, p.data(), P, &n1), FROST_OK);
    ASSERT_EQ(e128->prefill(0, p.data(), 100, nullptr), FROST_OK);  // off-grid call split...
    ASSERT_EQ(e128->prefill(0, p.data() + 100, P - 100, &n2), FROST_OK);
    ASSERT_EQ(e256->prefill(0, p.data(), P, &n3), FROST_OK);
    const auto s64 = state_bytes(*e64, P), s256 = state_bytes(*e256, P);
    ASSERT_EQ(s64.size(), s256.size());
    EXPECT_TRUE(s64 == s256) << "C_p 64 vs 256 states differ at P=" << P;
    EXPECT_EQ(n1, n3);
    std::vector<float> l64, l256;
    ASSERT_EQ(e64->last_logits(0, &l64), FROST_OK);
    ASSERT_EQ(e256->last_logits(0, &l256), FROST_OK);
    EXPECT_EQ(0, std::memcmp(l64.data(), l256.data(), l64.size() * sizeof(float))) << "last-row logits differ";
    // ...lands inside a GDN chunk, so only the token is promised there, not the bits.
    EXPECT_EQ(n1, n2);
}

TEST(EngineConsistency, SeededSamplingIsReproducibleAndAdvancesTheCursor) {
    const auto p = prompt();
    auto e = make(128);
    ASSERT_TRUE(e) << "engine on fixture qwen35-tiny-a failed to load";
    GenerateRequest r;
    r.prompt = std::vector<int32_t>(p.begin(), p.begin() + 40);
    r.max_new_tokens = 10;
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 50;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 42;
    GenerateResult a, b, c;
    ASSERT_EQ(generate(*e, 0, r, &a), FROST_OK);
    kernels::StepCursor cur{};
    ASSERT_EQ(e->read_cursor(0, &cur), FROST_OK);
    EXPECT_EQ(cur.rng_counter, 10u);
    EXPECT_EQ(cur.pos, 40 + 9);
    EXPECT_EQ(cur.last_token, a.ids.back());
    const uint64_t captures = e->capture_count();
    ASSERT_EQ(generate(*e, 0, r, &b), FROST_OK);
    EXPECT_EQ(a.ids, b.ids);
    EXPECT_EQ(a.fingerprint, b.fingerprint);
    r.sampling.seed = 43;
    ASSERT_EQ(generate(*e, 0, r, &c), FROST_OK);
    EXPECT_NE(a.ids, c.ids);
    EXPECT_EQ(e->capture_count(), captures) << "a step recaptured a graph";
}

TEST(EngineConsistency, RefusesBadInputWithoutSideEffects) {
    auto e = make(64);
    ASSERT_TRUE(e) << "engine on fixture qwen35-tiny-a failed to load";
    const int32_t bad[] = {1, 2, 99999};
    int32_t next;
    EXPECT_EQ(e->prefill(0, bad, 3, &next), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(e->position(0), 0);
    std::vector<int32_t> many(400, 1);
    EXPECT_EQ(e->prefill(0, many.data(), many.size(), &next), FROST_ERR_OUT_OF_RANGE);
    EXPECT_EQ(e->position(0), 0);
    // A bad id in a later chunk (C_p = 64): refused before the first chunk runs.
    std::vector<int32_t> late(150, 1);
    late[140] = -3;
    EXPECT_EQ(e->prefill(0, late.data(), late.size(), &next), FROST_ERR_INVALID_ARG);
    EXPECT_EQ(e->position(0), 0);
    EXPECT_TRUE(e->journal(0).empty());
}

}  // namespace
}  // namespace frost::model

namespace frost::model {
namespace {

TEST(EngineTrace, DumpsNamedActivationsOfTheLastStep) {
    EngineOptions o;
    o.max_seq_len = 128;
    o.prefill_chunk = 64;
    o.trace = true;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(test::fixture_dir("qwen35-tiny-a"), o, &e), FROST_OK) << frost_last_error();
    const int32_t ids[] = {5, 17, 2047, 0, 9};
    ASSERT_EQ(e->prefill(0, ids, 5, nullptr), FROST_OK);
    std::vector<float> emb, last;
    int rows = 0;
    ASSERT_EQ(e->read_trace("embed", -1, &emb, &rows), FROST_OK);
    const int H = e->config().hidden_size;
    ASSERT_GE(rows, 5);
    // The embedding rows are the bf16 table rows of the ids, exactly.
    ModelWeights w;
    ASSERT_EQ(load_weights(test::fixture_dir("qwen35-tiny-a"), &w), FROST_OK);
    const uint16_t* table = static_cast<const uint16_t*>(w.embed_tokens.data);
    for (int r = 0; r < 5; ++r)
        for (int i = 0; i < H; ++i) {
            uint32_t u = uint32_t(table[size_t(ids[r]) * H + i]) << 16;
            float f;
            std::memcpy(&f, &u, 4);
            ASSERT_EQ(emb[size_t(r) * H + i], f);
        }
    for (int l = 0; l < e->config().num_layers; ++l) {
        ASSERT_EQ(e->read_trace("layer_out", l, &last, &rows), FROST_OK) << l;
        ASSERT_EQ(e->read_trace(e->config().is_linear(l) ? "gdn_out" : "attn_out", l, &last, &rows), FROST_OK);
    }
    EXPECT_EQ(e->read_trace("nope", 0, &last, &rows), FROST_ERR_NOT_FOUND);
}

}  // namespace
}  // namespace frost::model

namespace frost::model {
namespace {

TEST(EngineSessions, InterleavedSessionsDoNotDisturbEachOther) {
    EngineOptions o;
    o.max_seq_len = 160;
    o.prefill_chunk = 64;
    o.sessions = 2;
    std::unique_ptr<Engine> e;
    ASSERT_EQ(Engine::create(test::fixture_dir("qwen35-tiny-a"), o, &e), FROST_OK) << frost_last_error();
    test::Golden g;
    std::string err;
    ASSERT_TRUE(test::load_golden(test::fixture_dir("qwen35-tiny-a"), &g, &err)) << err;
    const int P = 100;
    std::vector<int32_t> other(g.prompt_ids.rbegin(), g.prompt_ids.rbegin() + 70);
    int32_t a = -1, b = -1;
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data(), 64, nullptr), FROST_OK);
    ASSERT_EQ(e->prefill(1, other.data(), other.size(), &b), FROST_OK);
    ASSERT_EQ(e->prefill(0, g.prompt_ids.data() + 64, P - 64, &a), FROST_OK);
    std::vector<int32_t> got{a};
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(e->decode(1, &b), FROST_OK);
        ASSERT_EQ(e->decode(0, &a), FROST_OK);
        got.push_back(a);
    }
    // Reference: session 0 alone on a fresh engine.
    std::unique_ptr<Engine> solo;
    o.sessions = 1;
    ASSERT_EQ(Engine::create(test::fixture_dir("qwen35-tiny-a"), o, &solo), FROST_OK);
    int32_t s = -1;
    ASSERT_EQ(solo->prefill(0, g.prompt_ids.data(), P, &s), FROST_OK);
    std::vector<int32_t> want{s};
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(solo->decode(0, &s), FROST_OK);
        want.push_back(s);
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(e->position(0), P + 5);
    EXPECT_EQ(e->position(1), 70 + 5);
    // Every state buffer of session 1 is distinct from session 0's and registered with a role.
    for (const auto& b0 : e->state_buffers(0))
        for (const auto& b1 : e->state_buffers(1)) EXPECT_NE(b0.buf, b1.buf);
}

}  // namespace
}  // namespace frost::model
