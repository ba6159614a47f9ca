// Same-host endpoints of the stream channel: who "this host" is, and the AF_UNIX sockets that
// carry stream requests between processes of one host (stream_server.h invariant 11). No CAF.
//
// Invariants:
//  1. host_identity() names the kernel instance and the network namespace this process runs
//     in: /proc/sys/kernel/random/boot_id (new at every boot, different on every machine and
//     VM) and the inode of /proc/self/ns/net. Two processes with the same identity reach each
//     other's abstract AF_UNIX sockets (the abstract namespace is per network namespace), and
//     the kernel translates SO_PEERCRED's pid into the owner's pid namespace, which
//     cross-memory attach takes (cross_memory.h). Containers with their own network namespace
//     differ, and their transfers use TCP. An identity that cannot be read is "" and matches
//     nothing (no same-host path), never a guess.
//  2. A unix endpoint is an abstract socket name with 64 random bits (getrandom) beside the
//     pid: no file to clean up after a crash, nothing another process can bind first, and a
//     name nobody can guess without being told (handles carry it, as they carry the TCP port).
//  3. peer_credentials() is the kernel's word (SO_PEERCRED: the connecting process's pid and
//     uid at connect time), never what a peer says about itself.
//  4. Every call that waits has a deadline; errors name the endpoint and errno.
//  5. A requester trusts a same-host listener only when the kernel says it runs as the
//     requester's own uid (listener_is_own_uid(): SO_PEERCRED of the connected socket), checked
//     before a byte or a secret is sent. An owner serves only its own uid (stream_server.h
//     invariant 12), so a listener of another uid is never an owner this process could use: it
//     is a process that bound the name after its owner died (abstract names are free again
//     the moment their socket closes), and it learns nothing but the connect.
#pragma once

#include <sys/types.h>

#include <string>

#include "components/socket_io.h"

namespace caf_rdma {

/// Invariant 1: "<boot_id>/net:<inode>" of this process, read once; "" when unreadable.
const std::string& host_identity();

/// How an owner's refusal of a requester of another uid begins (permission_denied, sent at
/// accept): the one text by which a requester tells it from a refused access (a write into a
/// read-only buffer is permission_denied too) and gives up the endpoint.
constexpr const char* kOtherUidRefusal = "same-host stream channel refuses pid ";
/// Whether `st` is that refusal.
bool is_other_uid_refusal(const Status& st);

/// The endpoint to use for an owner that announced (`owner_host_id`, `unix_name`): `unix_name`
/// when the owner runs on this host (same identity, both non-empty), else "" (use TCP).
std::string same_host_endpoint(const std::string& owner_host_id, const std::string& unix_name);

/// A listening, non-blocking AF_UNIX stream socket on a fresh abstract name (invariant 2);
/// `*name` gets the name (without the leading NUL).
Result<Socket> listen_unix(std::string* name);
/// Connects to abstract name `name` before the deadline.
Result<Socket> connect_unix(const std::string& name, Deadline deadline);

/// Who is on the other end of a connected AF_UNIX socket (invariant 3).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
};
Result<PeerCredentials> peer_credentials(const Socket& s);

/// How the refusal of a same-host listener of another uid begins (invariant 5): the one text by
/// which a requester tells it from the owner's answers.
constexpr const char* kForeignListener = "same-host listener of another uid: ";
/// Invariant 5: ok when the listener at the other end of `s` (connected to @`name`) runs as
/// this process's effective uid; else permission_denied, starting with kForeignListener, naming
/// the endpoint, the listener's pid and uid, and this process's uid.
Status listener_is_own_uid(const Socket& s, const std::string& name);
/// Whether `st` is that refusal.
bool is_foreign_listener(const Status& st);

}  // namespace caf_rdma
