// Random grammar sentences (see grammar_sample_util.h).
#include "grammar_sample_util.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace frost::text::testing {

namespace {

bool in(const char* set, int b) { return b != 0 && std::strchr(set, b) != nullptr; }

}  // namespace

uint64_t grammar_test_seed(const char* test_name) {
    const char* env = std::getenv("FROST_GRAMMAR_SEED");
    const uint64_t seed = (env && *env) ? std::strtoull(env, nullptr, 10)
                                        : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("[ grammar ] %s: seed %llu (FROST_GRAMMAR_SEED=%llu repeats it)\n", test_name,
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    return seed;
}

bool sample_sentence(grammar::Machine& m, std::mt19937_64& rng, size_t max_bytes, std::string* out,
                     bool* dead_end) {
    out->clear();
    if (dead_end) *dead_end = false;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    uint32_t f = m.start();
    std::vector<int> allowed, closers, escapes;
    while (out->size() < max_bytes) {
        allowed.clear();
        closers.clear();
        escapes.clear();
        for (int b = 0; b < 256; ++b) {
            if (m.step(f, uint8_t(b)) == grammar::kDead) continue;
            allowed.push_back(b);
            if (in("\"]}", b)) closers.push_back(b);
            if (in("\\udD89abAB0cCeEfF", b)) escapes.push_back(b);
        }
        if (m.accepts(f) && (allowed.empty() || u(rng) < 0.5)) return true;
        if (allowed.empty()) {
            if (dead_end) *dead_end = true;
            return false;
        }
        // Now and then try a piece of a surrogate escape (or of a raw 3-byte character near the
        // surrogate block): taken only where the grammar keeps the walk alive, so lone halves
        // are offered all the time and the walk must finish them correctly by itself.
        static const char* kPieces[] = {"\\ud8", "\\udb", "\\udc", "\\udf", "\\uD83D", "\\ud83d\\u",
                                        "\\ud83d\\ude", "\\uDBFF\\uD", "\\ud800\\udc", "\xED\xA0", "\xED\x9F",
                                        "\xEE\x80", "\xF4\x8F", "\xF4\x90", "\xC0", "\xE0\x9F"};
        if (u(rng) < 0.08) {
            const char* piece = kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
            const uint32_t g = m.walk(f, piece, std::strlen(piece));
            if (g != grammar::kDead) {
                out->append(piece);
                f = g;
                continue;
            }
        }
        // The pull toward closers grows with the length, so deep nests unwind.
        const double r = u(rng), p_close = 0.2 + double(out->size()) / double(2 * max_bytes);
        const std::vector<int>& pool =
            (r < p_close && !closers.empty()) ? closers : (r < p_close + 0.3 && !escapes.empty()) ? escapes : allowed;
        const int b = pool[rng() % pool.size()];
        out->push_back(char(b));
        f = m.step(f, uint8_t(b));
    }
    return false;
}

}  // namespace frost::text::testing
