// Writing one safetensors file of a checkpoint: the header of its tensors, then their data from
// several threads at once, each piece of work (a "unit": a tensor, or the parts of a quantized
// module) written at its offset by pwrite, so the bytes do not depend on the thread count. The file
// appears under its name only when complete (written as NAME.partial, then renamed), and a failure
// removes the partial file. Shared by `frost synth` and `frost quantize`; every write, the resize
// and the rename pass the I/O fault gate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "util/progress.h"

namespace frost::model {

// A tensor's header entry; begin is relative to the data region.
struct ShardEntry {
    std::string name, dtype;  // dtype: the safetensors name ("BF16", "F8_E4M3", ...)
    std::vector<int64_t> shape;
    uint64_t begin = 0, bytes = 0;
};

// Writes n bytes at data offset `off`. False once the file has failed (the first error is kept):
// the unit should return.
using ShardPut = std::function<bool(const void* src, size_t n, uint64_t off)>;

struct ShardJob {
    std::vector<ShardEntry> entries;  // header order
    size_t units = 0;                 // fill is called once for each of 0 .. units - 1, in any order
    std::function<void(size_t unit, const ShardPut& put)> fill;
    unsigned threads = 1;
    bool holes = false;  // the data region as one hole (a sparse file reading as zeros); fill is not called
};

// Where each tensor of a checkpoint goes: tensors in order, a new shard when the next unit would
// pass shard_bytes. A tensor with unit_bytes > 0 starts a unit of that many bytes (its own, or a
// quantized module's parts together); unit_bytes 0 continues the current one, so a unit never
// straddles two shards.
struct ShardSlot {
    uint64_t bytes = 0, unit_bytes = 0;  // in
    size_t shard = 0;                    // out
    uint64_t begin = 0;                  // out: offset in the shard's data region
};
// Fills shard and begin; returns the shard count (at least 1) and *total the bytes of all tensors.
size_t place_in_shards(std::vector<ShardSlot>* slots, uint64_t shard_bytes, uint64_t* total);

// "model.safetensors" for one file, "model-00002-of-00005.safetensors" for the i-th of n.
std::string shard_file_name(size_t i, size_t n);

// Writes `path` as the job says; `bar` (may be null) advances by the bytes written.
frost_status write_shard_file(const std::string& path, const ShardJob& job, util::Progress* bar);

}  // namespace frost::model
