// NodeObjects: which RdmaClients and RegisteredBuffers live in each actor system, so that an
// RdmaNode destroyed while some still live neither hangs nor leaves them dangling.
//
// CAF's actor system waits in its destructor for every actor, and each RdmaClient and
// RegisteredBuffer holds a blocking actor until it goes: a node destroyed before them waited for
// ever. With this table the node's destructor knows, at once, what still lives.
//
// Invariants:
//  1. An object is listed from its construction to its destruction (a moved-from
//     RegisteredBuffer is not), under the actor system it holds, with a text naming it.
//  2. `stop` marks the system stopped and returns the texts of what still lives; once stopped,
//     `stopped` is true for the process's life, and every call of a listed object fails at once
//     with `stopped_text` (peer_unavailable), touching nothing; their destructors return.
//  3. A system kept by `keep` is never destroyed (its destructor would wait for those objects):
//     it stays reachable from here, with its threads, until the process ends.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma::detail {

/// Adds an object of `sys` named `what`; the token removes it.
uint64_t node_object_added(const caf::actor_system& sys, std::string what);
void node_object_removed(const caf::actor_system& sys, uint64_t token);
/// Marks `sys` stopped; the texts of its objects still alive (invariant 2).
std::vector<std::string> node_objects_stop(const caf::actor_system& sys);
/// Whether the node of `sys` was destroyed while objects of it lived.
bool node_stopped(const caf::actor_system& sys);
/// Nothing while the node of `sys` runs; after it stopped (invariant 2), peer_unavailable
/// "its RdmaNode was destroyed while this WHAT lived (...)": the error of every call of `what`.
Status node_alive(const caf::actor_system& sys, const std::string& what);
/// Keeps `sys`, and the config it reads, for the process's life (invariant 3).
void node_system_keep(std::unique_ptr<caf::actor_system_config> config,
                      std::unique_ptr<caf::actor_system> sys);

}  // namespace caf_rdma::detail
