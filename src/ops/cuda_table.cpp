// The CUDA op table. Empty in this build: every slot is null, so each op on a CUDA stream returns
// FROST_ERR_UNSUPPORTED naming itself. The CUDA-kernels engineer assigns the launchers here under
// FROST_WITH_CUDA (e.g. `t.gemm = &kernels::cuda::gemm;`).
#include "ops/ops.h"

namespace frost::ops {

const CudaOpTable& cuda_op_table() {
    static const CudaOpTable table = [] {
        CudaOpTable t;
#ifdef FROST_WITH_CUDA
        // CUDA launchers are registered here once they exist.
#endif
        return t;
    }();
    return table;
}

}  // namespace frost::ops
