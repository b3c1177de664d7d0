// Judging a MoE transformers golden on the CPU engine with the reference's own routing record.
//
// The record (next-tiny-a: inside golden.json; moe-tiny-a / -vl: router.json beside it, made by
// tests/fixtures/tools/gen_router_record.py) holds, per MoE layer and token, the expert ids the
// float64 reference used and its k-th minus (k+1)-th float32 router probability. The check runs the
// prompt in one traced prefill step and the greedy steps by decode, and compares at every token:
//  - our expert set with the reference's: a differing set (a flip) is acceptable only where the
//    reference's gap is below kNearTie (our fp32 router probabilities differ from its by ~1e-6);
//  - the logits (relative L2 <= 1e-3 per stored row): a row past it is acceptable only at or after
//    an actual flip, since a flipped expert changes every later token through the recurrent and
//    attention state; with no flip before it, no near-tie explains it and the check fails;
//  - greedy tokens identical, unless a flip came first.
// Every near-tie token (flipped or not) and every flip is printed and recorded as a test property.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace frost::test {

constexpr double kMoeGoldenMaxRelL2 = 1e-3;
constexpr double kMoeNearTie = 1e-5;

struct LayerRouting {
    std::vector<std::vector<int>> prompt_topk, greedy_topk;  // [token][k], sorted
    std::vector<double> prompt_gap, greedy_gap;              // [token]
};

struct RoutingRecord {
    std::vector<int> moe_layers;
    std::map<int, LayerRouting> layers;
};

// Reads fields "moe_layers" and "router" of a JSON file. False with a message naming the file and field.
bool load_routing_record(const std::string& path, RoutingRecord* out, std::string* err);

// Runs fixture `name` (tests/fixtures/<name>) against its golden and the routing record in
// <fixture>/<record_file>; adds gtest failures as described above and prints the report.
void check_moe_golden(const std::string& name, const std::string& record_file);

}  // namespace frost::test
