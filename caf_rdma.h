// caf_rdma.h: caf-rdma's public API in one header, for programs in other workspaces (Bazel target
// @caf_rdma//:caf_rdma; README.md, "Use caf-rdma in your project"; examples/external).
//
// What it brings, by header:
//  - actors/rdma_node.h: RdmaNode and NodeOptions (an actor system with a manager published on a
//    TCP port; other nodes' managers by host:port), connect_published, parse_host_port;
//  - actors/rdma_client.h: RdmaClient, the blocking front end for code that is not an actor
//    (request_buffer, release, read, write, batch, stats, put/get in the node's directory);
//  - actors/rdma_manager_actor.h: ManagerOptions (from_env: the CAF_RDMA_* variables);
//  - actors/rdma_manager_interface.h: the manager's typed interfaces and atoms, for actors that
//    send it messages themselves;
//  - actors/rdma_messages.h: BufferHandle, TransferOp (make_read, make_write), TransferReply,
//    ManagerStats, add_message_types;
//  - actors/rdma_errors.h and primitives/status.h: ErrorCode, Error, Status and Result<T>.
// Everything is in namespace caf_rdma.
#pragma once

// caf-rdma's headers are C++17. Bazel 4's default toolchain compiles with -std=c++0x: give the
// target that includes this header copts = ["-std=c++17"] (or build --cxxopt=-std=c++17).
#if __cplusplus < 201703L
#error "caf-rdma needs C++17: add copts = [\"-std=c++17\"] to the target that includes caf_rdma.h"
#endif

#include "actors/cancel_token.h"
#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_manager_actor.h"
#include "actors/rdma_manager_interface.h"
#include "actors/rdma_messages.h"
#include "actors/rdma_node.h"
#include "primitives/status.h"
