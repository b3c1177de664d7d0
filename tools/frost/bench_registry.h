// Registry of `frost bench <kind>` benchmarks. Each tools/frost/cmd_bench_<kind>.cpp registers one
// kind with FROST_BENCH_KIND("kind", "summary", fn); cmd_bench.cpp dispatches to it.
#pragma once
#include <string>
#include <vector>

namespace frost::cli {

using BenchFn = int (*)(const std::vector<std::string>& args);  // args exclude "frost bench <kind>"

struct BenchKind {
    const char* name;
    const char* summary;
    BenchFn fn;
};

bool register_bench_kind(const BenchKind& k);
const std::vector<BenchKind>& bench_kinds();

}  // namespace frost::cli

#define FROST_BENCH_CAT2(a, b) a##b
#define FROST_BENCH_CAT(a, b) FROST_BENCH_CAT2(a, b)
#define FROST_BENCH_KIND(name, summary, fn) \
    static const bool FROST_BENCH_CAT(frost_bench_registered_, __LINE__) = \
        ::frost::cli::register_bench_kind(::frost::cli::BenchKind{name, summary, fn})
