// Safetensors reader: strict header validation (reliability T01-T05) and zero-copy views into
// memory-mapped files; sharded checkpoints through model.safetensors.index.json. Every refusal
// names the file, the tensor and the rule that failed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/weights.h"
#include "util/mapped_file.h"

namespace frost::model {

constexpr uint64_t kSafetensorsMaxHeader = 100000000;  // bytes; larger headers are refused (T01)

// One tensor entry of a header, offsets relative to the start of the data region.
struct SafetensorsEntry {
    std::string name;
    DType dtype = DType::BF16;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
    uint64_t header_bytes = 0;   // N (the JSON length)
    uint64_t data_offset = 0;    // 8 + N: where the data region starts in the file
    std::vector<SafetensorsEntry> entries;  // in header order
    std::map<std::string, std::string> metadata;
};

// Validates a complete safetensors file held in memory (`bytes` = the file, `size` its length):
// header length, JSON, duplicate keys, dtypes, shapes, sizes and exact tiling of the data region.
// Reads nothing outside [bytes, bytes+size). Used by the reader and the fuzz target.
frost_status parse_safetensors_header(const uint8_t* bytes, size_t size, const std::string& source,
                                      SafetensorsHeader* out);
// Same, for a file of `file_size` bytes whose first `prefix_size` bytes are in `prefix` (the
// reader preads only 8 + N bytes). prefix_size must cover 8 + N for the parse to succeed.
frost_status parse_safetensors_prefix(const uint8_t* prefix, size_t prefix_size, uint64_t file_size,
                                      const std::string& source, SafetensorsHeader* out);

// A tensor of an opened checkpoint.
struct CheckpointTensor {
    std::string name;
    DType dtype = DType::BF16;
    std::vector<int64_t> shape;
    size_t file = 0;          // index into Checkpoint::files()
    uint64_t file_offset = 0; // absolute byte offset of the data in that file
    uint64_t bytes = 0;
    const void* data = nullptr;  // aligned to the element size: into the mapping, or owned copy
    bool copied = false;         // data was unaligned in the file and lives in owned storage
    TensorView view() const;
};

class Checkpoint {
public:
    // Opens MODEL_DIR: model.safetensors.index.json when present (every shard it names), else
    // model.safetensors. Each file is validated before anything is handed out.
    static frost_status open_dir(const std::string& model_dir, std::shared_ptr<Checkpoint>* out);
    // Opens a list of safetensors files as one checkpoint (tensor names must be unique across).
    static frost_status open_files(const std::vector<std::string>& paths,
                                   std::shared_ptr<Checkpoint>* out);

    const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
    const CheckpointTensor* find(const std::string& name) const;
    size_t file_count() const { return files_.size(); }
    const util::MappedFile& file(size_t i) const { return *files_[i]; }
    std::vector<std::string> paths() const;
    const std::map<std::string, std::string>& metadata(size_t file) const { return metadata_[file]; }
    uint64_t data_bytes() const;  // sum of tensor bytes

    // FROST_ERR_IO naming the file if any file is now shorter than when it was opened (reading
    // through the mapping would raise SIGBUS). Call before touching mapped tensor data.
    frost_status check_intact() const;

private:
    frost_status add_file(const std::string& path);
    std::vector<std::unique_ptr<util::MappedFile>> files_;
    std::vector<std::map<std::string, std::string>> metadata_;
    std::vector<CheckpointTensor> tensors_;
    std::map<std::string, size_t> by_name_;
    std::vector<std::unique_ptr<uint8_t[]>> owned_;
};

// Parses "BF16", "F32", ...; false for an unknown name.
bool parse_dtype(const std::string& name, DType* out);

// "[4096,2048]": a tensor shape as error messages print it.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace frost::model
