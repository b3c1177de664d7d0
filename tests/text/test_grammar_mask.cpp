// Token masks (src/text/grammar/token_mask.h): the trie walk against brute force (each id's bytes
// walked through the matcher on its own), on a small random vocabulary and on the real Qwen3
// tokenizer, plus random constrained generations whose output must parse; prints the mask time
// per step (the benchmark of the issue-17 note).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "text/grammar/front_ends.h"
#include "text/grammar/vocab.h"
#include "grammar_sample_util.h"
#include "text_test_util.h"

namespace g = frost::text::grammar;

namespace {

bool bit(const std::vector<uint32_t>& m, int32_t id) { return (m[size_t(id) >> 5] >> (id & 31)) & 1u; }

// Allowed by definition: the id's bytes walk to a live frontier (end ids: the grammar accepts).
bool brute(g::Machine& m, const g::TokenMasker& k, uint32_t f, int32_t id) {
    if (k.is_end(id)) return m.accepts(f);
    if (!k.is_text(id)) return false;
    const std::string& b = k.bytes(id);
    return m.walk(f, b.data(), b.size()) != g::kDead;
}

std::shared_ptr<g::Machine> machine_of_schema(const char* schema_text) {
    g::Grammar gr;
    EXPECT_EQ(g::parse_json_schema(nlohmann::ordered_json::parse(schema_text), &gr), FROST_OK) << frost::last_error();
    return std::make_shared<g::Machine>(std::move(gr));
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "city": {"type": "string"},
    "days": {"type": "integer"},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "ok": {"type": ["boolean", "null"]}
  },
  "required": ["city", "days", "unit", "tags", "ok"],
  "additionalProperties": false
})";

// One random constrained generation: half the steps a uniformly random allowed id, half a random
// allowed one-byte id (so strings end and the run terminates). Returns the text; *done when an
// end id was chosen.
std::string generate(g::Matcher& mt, const g::TokenMasker& k, std::mt19937_64& rng, int max_steps, bool* done,
                     std::vector<double>* us) {
    std::string out;
    *done = false;
    for (int step = 0; step < max_steps; ++step) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<uint32_t>& m = mt.mask();
        const auto t1 = std::chrono::steady_clock::now();
        if (us) us->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        std::vector<int32_t> allowed, short_ones;
        for (int32_t id = 0; id < k.vocab_size(); ++id)
            if (bit(m, id)) {
                allowed.push_back(id);
                if (k.is_end(id) || (k.is_text(id) && k.bytes(id).size() == 1)) short_ones.push_back(id);
            }
        EXPECT_FALSE(allowed.empty()) << "dead end after '" << out << "'";
        if (allowed.empty()) return out;
        const auto& pool = (rng() % 2 && !short_ones.empty()) ? short_ones : allowed;
        const int32_t id = pool[rng() % pool.size()];
        EXPECT_TRUE(mt.accept(id)) << "masked id " << id << " refused";
        if (k.is_end(id)) {
            *done = true;
            return out;
        }
        out += k.bytes(id);
    }
    return out;
}

}  // namespace

TEST(TokenMask, MatchesBruteForceOnARandomVocabulary) {
    const uint64_t seed = frost::text::testing::grammar_test_seed("TokenMask.MatchesBruteForceOnARandomVocabulary");
    SCOPED_TRACE("FROST_GRAMMAR_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::string alphabet = "{}[]\":, 0123456789.-etruefalsn\\ab\xC3\xA9";
    std::vector<std::string> vocab(600);
    std::vector<uint8_t> skip(vocab.size(), 0);
    for (size_t i = 0; i < vocab.size(); ++i) {
        const size_t len = 1 + rng() % 5;
        for (size_t j = 0; j < len; ++j) vocab[i] += alphabet[rng() % alphabet.size()];
    }
    for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, char(b)));  // every byte, as BPE has
    vocab.push_back("<|end|>");
    skip.resize(vocab.size(), 0);
    skip.back() = 1;
    const int32_t end_id = int32_t(vocab.size()) - 1;
    const g::TokenMasker k(vocab, skip, {end_id}, int32_t(vocab.size()) + 7);  // padded width
    auto m = machine_of_schema(kSchema);
    for (int run = 0; run < 20; ++run) {
        g::Matcher mt(m, std::shared_ptr<const g::TokenMasker>(&k, [](const g::TokenMasker*) {}));
        for (int step = 0; step < 200 && !mt.finished(); ++step) {
            const std::vector<uint32_t> mask = mt.mask();
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < k.vocab_size(); ++id) {
                const bool want = brute(*m, k, mt.frontier(), id);
                ASSERT_EQ(bit(mask, id), want) << "id " << id << " step " << step;
                if (want) allowed.push_back(id);
            }
            ASSERT_FALSE(allowed.empty());
            ASSERT_TRUE(mt.accept(allowed[rng() % allowed.size()]));
        }
    }
}

TEST(TokenMask, RealTokenizerMasksAreExactAndOutputsParse) {
    // FROST_GRAMMAR_BENCH_TOKENIZER=DIR runs the same on another tokenizer (the 248k Qwen3.5
    // vocabulary of .frost/tokenizer for the issue-17 note); default: the repository's fixture.
    std::unique_ptr<frost::text::Tokenizer> other;
    const frost::text::Tokenizer* tok = frost::text::testing::qwen3_tokenizer();
    if (const char* dir = std::getenv("FROST_GRAMMAR_BENCH_TOKENIZER")) {
        ASSERT_EQ(frost::text::Tokenizer::load(dir, &other), FROST_OK) << frost::last_error();
        tok = other.get();
    }
    ASSERT_NE(tok, nullptr) << "fixture missing: tests/fixtures/tokenizer-qwen3 (" << frost::last_error() << ")";
    const int32_t im_end = tok->token_to_id("<|im_end|>");
    ASSERT_GE(im_end, 0);
    auto t0 = std::chrono::steady_clock::now();
    auto k = g::make_token_masker(*tok, {im_end}, tok->vocab_size() + 5);
    const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto m = machine_of_schema(kSchema);
    // A fresh seed every run (the rare unparseable output fresh seeds found in CI was a lone
    // surrogate escape, now refused by the grammar: test_grammar.cpp JsonStrings.*);
    // FROST_GRAMMAR_SEED repeats a run, and a failure names its seed.
    const uint64_t seed = frost::text::testing::grammar_test_seed("TokenMask.RealTokenizerMasksAreExactAndOutputsParse");
    SCOPED_TRACE("FROST_GRAMMAR_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::vector<double> us;
    int finished = 0;
    for (int run = 0; run < 12; ++run) {
        g::Matcher mt(m, k);
        bool done = false;
        // Spot-check exactness on the first runs: a random sample of ids against brute force.
        if (run < 2) {
            for (int step = 0; step < 40 && !mt.finished(); ++step) {
                const std::vector<uint32_t> mask = mt.mask();
                for (int s = 0; s < 3000; ++s) {
                    const int32_t id = int32_t(rng() % uint64_t(k->vocab_size()));
                    ASSERT_EQ(bit(mask, id), brute(*m, *k, mt.frontier(), id)) << "id " << id;
                }
                std::vector<int32_t> allowed;
                for (int32_t id = 0; id < k->vocab_size(); ++id)
                    if (bit(mask, id)) allowed.push_back(id);
                ASSERT_FALSE(allowed.empty());
                ASSERT_TRUE(mt.accept(allowed[rng() % allowed.size()]));
            }
            continue;
        }
        const std::string out = generate(mt, *k, rng, 4000, &done, &us);
        if (!done) continue;
        ++finished;
        ASSERT_TRUE(nlohmann::json::accept(out)) << out;
        const auto j = nlohmann::json::parse(out);
        // The grammar bounds numbers to finite doubles (json_schema.cpp).
        EXPECT_TRUE(j["days"].is_number_integer() && std::isfinite(j["days"].get<double>())) << out;
        EXPECT_TRUE(j["city"].is_string() && j["days"].is_number_integer() && j["tags"].is_array() &&
                    j["tags"].size() <= 3 && (j["ok"].is_boolean() || j["ok"].is_null()))
            << out;
        EXPECT_TRUE(j["unit"] == "celsius" || j["unit"] == "fahrenheit") << out;
    }
    EXPECT_GE(finished, 5) << "too few random generations finished";
    ASSERT_FALSE(us.empty());
    std::vector<double> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double x : us) sum += x;
    const double p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    std::printf("[bench] vocab %d, trie %zu nodes, built in %.0f ms; JSON-schema mask: %zu steps, mean %.1f us, "
                "p50 %.1f us, p99 %.1f us, max %.1f us; %zu frontiers\n",
                k->vocab_size(), k->trie_nodes(), build_ms, us.size(), sum / double(us.size()),
                sorted[sorted.size() / 2], p99, sorted.back(), m->frontier_count());
}
