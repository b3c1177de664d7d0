// A backend of the ops layer on its own context and stream, as the ops tests drive it.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "ops/ops.h"

namespace frost::ops::test {

struct OpsCtx {
    frost_ctx* ctx = nullptr;
    frost_stream* st = nullptr;
    std::unique_ptr<Backend> backend;
    explicit OpsCtx(frost_backend b = FROST_BACKEND_CPU) {
        EXPECT_EQ(frost_ctx_create(b, 0, &ctx), FROST_OK) << frost_last_error();
        EXPECT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK) << frost_last_error();
        EXPECT_EQ(Backend::create(ctx, st, &backend), FROST_OK) << frost_last_error();
    }
    ~OpsCtx() {
        backend.reset();  // the backend's buffers go before their context
        if (ctx) frost_ctx_destroy(ctx);
    }
    OpsCtx(const OpsCtx&) = delete;
    OpsCtx& operator=(const OpsCtx&) = delete;
    Exec exec(const OpObserver* obs = nullptr) const { return Exec{st, backend.get(), obs}; }
};

}  // namespace frost::ops::test
