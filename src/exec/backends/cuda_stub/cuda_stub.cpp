// Built instead of backends/cuda when CUDA is off: the cuda backend reports itself unavailable.
#include "exec/backend.h"
#include "exec/error.h"

namespace frost::exec {

frost_status make_cuda_backend(int, std::unique_ptr<Backend>*) {
    return fail(FROST_ERR_UNSUPPORTED, "this build of frost has no CUDA backend (FROST_CUDA=OFF or no nvcc)");
}
int cuda_backend_available() { return 0; }

}  // namespace frost::exec
