// EXPECT_RDMA_ERROR: the assertion every manager test uses on a failed request (a
// caf::expected): it failed, with the error code expected, and its message names what a user
// needs (every fragment given). Shared by both manager fixtures (manager_fixture.h, with real
// nodes; deterministic_fixture.h, on CAF's test coordinator).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "actors/rdma_errors.h"

/// Asserts that `e` failed with `code` and its message contains every fragment.
#define EXPECT_RDMA_ERROR(e, code, ...)                                                         \
  do {                                                                                          \
    ASSERT_FALSE(e) << "expected an error";                                                     \
    EXPECT_EQ(::caf_rdma::error_code(e.error()), code) << ::caf_rdma::error_message(e.error()); \
    for (const char* frag : {__VA_ARGS__})                                                      \
      EXPECT_NE(::caf_rdma::error_message(e.error()).find(frag), std::string::npos)             \
          << "'" << frag << "' not in: " << ::caf_rdma::error_message(e.error());               \
  } while (false)
