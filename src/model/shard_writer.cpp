// The safetensors shard writer (shard_writer.h).
#include "model/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "exec/error.h"
#include "util/fs.h"

namespace frost::model {
namespace {

constexpr size_t kHeaderAlign = 8;  // the data region starts 8-byte aligned

}  // namespace

size_t place_in_shards(std::vector<ShardSlot>* slots, uint64_t shard_bytes, uint64_t* total) {
    uint64_t in_shard = 0;
    size_t shard = 0;
    *total = 0;
    for (auto& t : *slots) {
        if (in_shard > 0 && t.unit_bytes > 0 && in_shard + t.unit_bytes > shard_bytes) {
            ++shard;
            in_shard = 0;
        }
        t.shard = shard;
        t.begin = in_shard;
        in_shard += t.bytes;
        *total += t.bytes;
    }
    return shard + 1;
}

std::string shard_file_name(size_t i, size_t n) {
    if (n == 1) return "model.safetensors";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i + 1, n);
    return buf;
}

frost_status write_shard_file(const std::string& path, const ShardJob& job, util::Progress* bar) {
    nlohmann::json h = nlohmann::json::object();
    h["__metadata__"] = {{"format", "pt"}};
    uint64_t data = 0;
    for (const auto& e : job.entries) {
        h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.begin + e.bytes}}};
        data = std::max(data, e.begin + e.bytes);
    }
    std::string header = h.dump();
    header.append((kHeaderAlign - header.size() % kHeaderAlign) % kHeaderAlign, ' ');
    const std::string tmp = path + ".partial";
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return fail(FROST_ERR_IO, "cannot create %s", tmp.c_str());
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
    const uint64_t data_at = sizeof(len) + header.size();

    std::mutex mu;
    std::string first_err;
    std::atomic<bool> failed{false};
    auto record = [&](const std::string& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first_err = tmp + ": " + e;
    };
    auto sequential = [&](const void* src, size_t n) {
        std::string e;
        if (frost_fault_hit(FROST_FAULT_IO)) e = "injected I/O fault";
        else if (util::write_full(fd, src, n, &e)) return true;
        record(e);
        return false;
    };
    if (sequential(len, sizeof(len)) && sequential(header.data(), header.size())) {
        if (job.holes) {
            if (frost_fault_hit(FROST_FAULT_IO)) record("cannot extend to the data's size: injected I/O fault");
            else if (ftruncate(fd, off_t(data_at + data)) != 0) record("cannot extend to the data's size");
            else if (bar) bar->add(data);
        } else {
            std::atomic<size_t> next{0};
            std::atomic<uint64_t> written{0};
            const ShardPut put = [&](const void* src, size_t n, uint64_t off) {
                if (failed) return false;
                std::string e;
                if (frost_fault_hit(FROST_FAULT_IO)) e = "injected I/O fault";
                else if (util::pwrite_full(fd, src, n, data_at + off, &e)) return (written += n, true);
                record(e);
                return false;
            };
            // The bar is drawn from this thread only, every 100 ms until the last worker is done.
            std::condition_variable done_cv;
            unsigned done = 0;
            const unsigned threads = std::max(1u, job.threads);
            std::vector<std::thread> pool;
            for (unsigned k = 0; k < threads; ++k)
                pool.emplace_back([&] {
                    for (size_t u = next++; u < job.units && !failed; u = next++) job.fill(u, put);
                    std::lock_guard<std::mutex> lock(mu);
                    ++done;
                    done_cv.notify_one();
                });
            uint64_t shown = 0;
            {
                std::unique_lock<std::mutex> lock(mu);
                while (done < threads) {  // done grows under mu, in the workers
                    done_cv.wait_for(lock, std::chrono::milliseconds(100));
                    const uint64_t w = written;
                    if (bar) bar->add(w - shown);
                    shown = w;
                }
            }
            for (auto& th : pool) th.join();
            if (bar) bar->add(written - shown);
        }
    }
    frost_status s = failed ? fail(FROST_ERR_IO, "%s", first_err.c_str()) : FROST_OK;
    if (close(fd) != 0 && s == FROST_OK) s = fail(FROST_ERR_IO, "%s: close failed", tmp.c_str());
    if (s == FROST_OK && frost_fault_hit(FROST_FAULT_IO))
        s = fail(FROST_ERR_IO, "cannot rename %s to %s: injected I/O fault", tmp.c_str(), path.c_str());
    else if (s == FROST_OK && rename(tmp.c_str(), path.c_str()) != 0)
        s = fail(FROST_ERR_IO, "cannot rename %s to %s", tmp.c_str(), path.c_str());
    if (s != FROST_OK) unlink(tmp.c_str());
    return s;
}

}  // namespace frost::model
