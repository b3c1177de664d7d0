// The claim log file under a full disk (issue 13 B5): records are whole lines or nothing, a torn
// tail left by a crash (or lines a power cut damaged) is cut at the next start, events that could not be written wait and are
// written in order once the disk has room, and the result passes scripts/claimlog_check.py.
// The full disk is the exec layer's I/O fault gate, which makes the log's write stop part-way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frost/exec.h"
#include "serve/claim_log.h"

using namespace frost::serve;

namespace {

std::string temp_path(const char* stem) {
    std::mt19937_64 rng(std::random_device{}());
    return std::string(FROST_BINARY_DIR) + "/" + stem + "_" + std::to_string(rng()) + ".jsonl";
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every line is a whole JSON object; returns their seqs in file order.
std::vector<uint64_t> seqs_of(const std::string& text) {
    std::vector<uint64_t> out;
    EXPECT_TRUE(text.empty() || text.back() == '\n') << "file ends inside a record";
    size_t at = 0;
    while (at < text.size()) {
        const size_t nl = text.find('\n', at);
        const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        at = nl == std::string::npos ? text.size() : nl + 1;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        EXPECT_TRUE(j.is_object()) << "broken record: " << line;
        if (j.is_object()) out.push_back(j["seq"].get<uint64_t>());
    }
    return out;
}

void add(ClaimLog& log, const std::string& id, const char* event) {
    ClaimEvent e;
    e.claim_id = id;
    e.event = event;
    e.bytes = 100;
    log.append(e);
}

void run_checker(const std::string& path) {
    if (access(FROST_PYTHON_EXE, X_OK) != 0) {
        ADD_FAILURE() << "no " << FROST_PYTHON_EXE << " for scripts/claimlog_check.py";
        return;
    }
    const std::string cmd = std::string(FROST_PYTHON_EXE) + " " + FROST_SOURCE_DIR + "/scripts/claimlog_check.py " + path;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace

TEST(ClaimLogFile, FullDiskLeavesWholeRecordsAndLosesNothingOnceRoomReturns) {
    const std::string path = temp_path("claims_full_disk");
    std::mt19937 rng(std::random_device{}());
    const int before = 2 + int(rng() % 4), during = 1 + int(rng() % 5);
    {
        ClaimLog log;
        ASSERT_EQ(log.open_file(path), FROST_OK);
        for (int i = 0; i < before; ++i) add(log, "a" + std::to_string(i), claim_event::kAccepted);
        frost_fault_arm(FROST_FAULT_IO, 1, 1);  // the disk is full from now on
        for (int i = 0; i < during; ++i) add(log, "b" + std::to_string(i), claim_event::kAccepted);
        frost_fault_clear();
        EXPECT_GE(log.write_errors(), uint64_t(during));
        EXPECT_EQ(log.unwritten(), size_t(during));
        // While full: only whole records, the ones before the failure.
        const std::vector<uint64_t> mid = seqs_of(read_all(path));
        ASSERT_EQ(mid.size(), size_t(before));
        // Room again: the next event writes the waiting ones first, in order.
        for (int i = 0; i < before; ++i) add(log, "a" + std::to_string(i), claim_event::kMaterialized);
        for (int i = 0; i < during; ++i) add(log, "b" + std::to_string(i), claim_event::kMaterialized);
        EXPECT_EQ(log.unwritten(), 0u);
        EXPECT_EQ(log.lost(), 0u);
    }
    const std::vector<uint64_t> seqs = seqs_of(read_all(path));
    ASSERT_EQ(seqs.size(), size_t(2 * (before + during)));
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1);
    run_checker(path);
    std::remove(path.c_str());
}

TEST(ClaimLogFile, TornTailIsCutAtOpenAndTheNextEventStartsALine) {
    const std::string path = temp_path("claims_torn");
    {
        ClaimLog log;
        ASSERT_EQ(log.open_file(path), FROST_OK);
        add(log, "c1", claim_event::kAccepted);
    }
    {
        std::ofstream out(path, std::ios::app | std::ios::binary);
        out << R"({"seq":2,"time":0.5,"claim_id":"c1","ev)";  // a crash mid-record
    }
    ClaimLog log;
    ASSERT_EQ(log.open_file(path), FROST_OK);
    EXPECT_GT(log.repaired_bytes(), 0u);
    add(log, "c1", claim_event::kMaterialized);
    const std::vector<uint64_t> seqs = seqs_of(read_all(path));
    ASSERT_EQ(seqs.size(), 2u);
    EXPECT_EQ(seqs[0], 1u);
    EXPECT_EQ(seqs[1], 2u);
    run_checker(path);
    std::remove(path.c_str());
}

// What a power cut leaves of the unsynced tail: whole lines that are not records (zeros, random
// bytes), possibly followed by records. The log is cut after its last valid record, the damaged
// file is kept aside first, and the history goes on from there.
TEST(ClaimLogFile, DamagedLinesAreCutAfterTheLastValidRecordAndKeptAside) {
    const std::string path = temp_path("claims_damaged");
    {
        ClaimLog log;
        ASSERT_EQ(log.open_file(path), FROST_OK);
        add(log, "c1", claim_event::kAccepted);
        add(log, "c1", claim_event::kMaterialized);
        add(log, "c2", claim_event::kAccepted);
        add(log, "c2", claim_event::kRefused);
    }
    const std::string good = read_all(path);
    std::mt19937 rng(std::random_device{}());
    std::string damage(16 + rng() % 64, '\0');
    if (rng() % 2)  // zeros or random bytes, one damaged line either way
        for (auto& ch : damage) {
            ch = char(rng() % 256);
            if (ch == '\n') ch = ' ';
        }
    damage += "\n";
    damage += R"({"seq":9,"time":1,"claim_id":"c3","event":"accepted","tier":"device","bytes":1,"pinned":false})" "\n";
    {
        std::ofstream out(path, std::ios::app | std::ios::binary);
        out << damage;
    }
    ClaimLog log;
    ASSERT_EQ(log.open_file(path), FROST_OK);
    EXPECT_EQ(log.repaired_bytes(), damage.size());
    EXPECT_EQ(read_all(path), good);
    EXPECT_TRUE(log.previously_live("c1"));
    EXPECT_TRUE(log.previously_ended("c2"));
    EXPECT_FALSE(log.previously_live("c3"));  // after the damage: not part of the history
    add(log, "c1", claim_event::kPinned);
    const std::vector<uint64_t> seqs = seqs_of(read_all(path));
    ASSERT_EQ(seqs.size(), 5u);
    EXPECT_EQ(seqs.back(), 5u);
    run_checker(path);
    // The damaged file, whole, beside the log.
    const std::string dir = path.substr(0, path.rfind('/'));
    const std::string stem = path.substr(path.rfind('/') + 1) + ".damaged.";
    std::string kept;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(stem, 0) == 0) kept = entry.path().string();
    }
    ASSERT_FALSE(kept.empty());
    EXPECT_EQ(read_all(kept), good + damage);
    std::remove(kept.c_str());
    std::remove(path.c_str());
}
