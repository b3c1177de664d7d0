// Fast load of a ModelWeights' tensors into one static weight buffer of a ctx (device memory on
// CUDA). Large parallel preads fill one of a PAIR of pinned staging buffers while the other is
// being copied host->device asynchronously; the copies land at each tensor's fixed place.
// Works on every backend (on the CPU backend "device" memory is ordinary host memory).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "frost/exec.h"
#include "model/weights.h"

namespace frost::model {

struct WeightUploadOptions {
    frost_space space = FROST_SPACE_DEVICE;  // where the weight buffer lives
    size_t staging_bytes = size_t(64) << 20; // size of EACH of the two pinned staging buffers
    int read_threads = 4;                    // preads in flight per staging fill
    size_t read_chunk_bytes = size_t(8) << 20;  // one pread's size (a job for one thread)
    bool include_mtp = false;                // also upload every mtp.* tensor
    bool progress = true;                    // progress bar on stderr (tty only, loads > 1 s)
    // When the weight buffer is host-addressable (CPU backend) read straight into it with the
    // same parallel preads, skipping the staging copy that only DMA to a GPU needs.
    bool direct_when_host = true;
};

struct UploadedTensor {
    frost_buffer* buffer = nullptr;  // the weight buffer (shared by every tensor)
    size_t offset = 0;               // byte offset in it, aligned to kWeightAlignment
    size_t bytes = 0;
    DType dtype = DType::BF16;
};

struct UploadedWeights {
    frost_buffer* buffer = nullptr;                 // owned: free with release()
    std::map<std::string, UploadedTensor> tensors;  // by tensor name (tied lm_head -> embed's entry)
    uint64_t bytes_from_files = 0;   // bytes read with pread from the checkpoint files
    uint64_t bytes_from_memory = 0;  // bytes staged from owned host copies (de-interleaved, unaligned)
    double seconds = 0;              // wall time of the upload
    const UploadedTensor* find(const std::string& name) const;
    frost_status release();          // frees the weight buffer; tensors become invalid
};

constexpr size_t kWeightAlignment = 256;  // every tensor starts on this boundary in the buffer

// Uploads every bound tensor of `w` (and mtp.* if asked). On failure nothing stays allocated and
// *out is untouched. FROST_ERR_IO names the file when a read fails (e.g. the file shrank: T06).
frost_status upload_weights(frost_ctx* ctx, const ModelWeights& w, const WeightUploadOptions& opt,
                            UploadedWeights* out);

}  // namespace frost::model
