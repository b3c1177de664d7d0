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

namespace {

std::vector<int> pieces_of(const Plan& p) {
    return p.pieces.empty() ? std::vector<int>{int(p.prompt.size())} : p.pieces;
}

// One joining session of a sliced run: the piece staged now and the layers left to run.
struct Admission {
    size_t piece = 0, at = 0;
    bool staged = false;
};

// Advances session s's sliced prefill by one call (a random number of layers); true when its
// last piece finished (*next = its first token).
bool admit_some(Engine& e, int s, const Plan& p, Admission& a, std::mt19937& rng, int32_t* next) {
    const std::vector<int> pieces = pieces_of(p);
    if (!a.staged) {
        EXPECT_EQ(e.prefill_slices_begin(s, p.prompt.data() + a.at, size_t(pieces[a.piece])), FROST_OK)
            << frost_last_error();
        a.staged = true;
    }
    const int layers = std::uniform_int_distribution<int>(1, e.config().num_layers + 2)(rng);
    bool done = false;
    const frost_status st = e.prefill_slices_run(s, layers, &done, next);
    EXPECT_EQ(st, FROST_OK) << frost_last_error();
    if (st != FROST_OK) return true;  // give up on this session (the comparison fails)
    if (!done) return false;
    a.staged = false;
    a.at += size_t(pieces[a.piece]);
    return ++a.piece == pieces.size();
}

}  // namespace

Result solo(Engine& e, const Plan& p) {
    Result r;
    EXPECT_EQ(e.reset(0, p.sampling), FROST_OK) << frost_last_error();
    int32_t next = -1;
    size_t at = 0;
    for (int n : pieces_of(p)) {
        EXPECT_EQ(e.prefill(0, p.prompt.data() + at, size_t(n), &next), FROST_OK) << frost_last_error();
        at += size_t(n);
    }
    r.tokens.push_back(next);
    while (int(r.tokens.size()) < p.tokens) {
        EXPECT_EQ(e.decode(0, &next), FROST_OK) << frost_last_error();
        r.tokens.push_back(next);
    }
    r.state = state_bytes(e, 0);
    return r;
}

std::vector<Result> batched(Engine& e, const std::vector<Plan>& plans, std::vector<int>* sizes,
                            std::mt19937* slices) {
    const int S = int(plans.size());
    std::vector<Result> out(static_cast<size_t>(S));
    std::vector<char> joined(static_cast<size_t>(S), 0), admitting(static_cast<size_t>(S), 0);
    std::vector<Admission> adm(static_cast<size_t>(S));
    for (int t = 0;; ++t) {
        for (int s = 0; s < S; ++s) {
            const Plan& p = plans[size_t(s)];
            if (!joined[size_t(s)] && !admitting[size_t(s)] && p.join == t) {
                EXPECT_EQ(e.reset(s, p.sampling), FROST_OK) << frost_last_error();
                admitting[size_t(s)] = 1;
            }
            if (!admitting[size_t(s)]) continue;
            int32_t next = -1;
            if (slices) {
                if (!admit_some(e, s, p, adm[size_t(s)], *slices, &next)) continue;
            } else {
                size_t at = 0;
                for (int n : pieces_of(p)) {
                    EXPECT_EQ(e.prefill(s, p.prompt.data() + at, size_t(n), &next), FROST_OK) << frost_last_error();
                    at += size_t(n);
                }
            }
            out[size_t(s)].tokens.push_back(next);
            admitting[size_t(s)] = 0;
            joined[size_t(s)] = 1;
        }
        std::vector<int> members;
        for (int s = 0; s < S; ++s)
            if (joined[size_t(s)] && int(out[size_t(s)].tokens.size()) < plans[size_t(s)].tokens) members.push_back(s);
        const bool pending = std::any_of(plans.begin(), plans.end(), [&](const Plan& p) { return p.join > t; }) ||
                             std::any_of(admitting.begin(), admitting.end(), [](char a) { return a != 0; });
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

void random_pieces(std::mt19937& rng, int max_piece, std::vector<Plan>* plans) {
    for (Plan& p : *plans) {
        p.pieces.clear();
        for (int left = int(p.prompt.size()); left > 0;) {
            const int n = std::min(left, std::uniform_int_distribution<int>(1, max_piece)(rng));
            p.pieces.push_back(n);
            left -= n;
        }
    }
}

}  // namespace frost::model::batch_test
