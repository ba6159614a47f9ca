// The member actor's behaviour: each handler routes its message to one MemberState method
// (member_state.h); a monitored member's departure goes to MemberState::member_down.
#include "systems/collectives/group_member.h"

#include <caf/all.hpp>

#include "systems/collectives/member_state.h"

namespace caf_rdma::group {

namespace {

using detail::MemberState;
using detail::Note;
using detail::Shape;

caf::behavior member(MemberState::Self self, rdma_manager_actor manager, MemberConfig cfg,
                     MemberBuffers buf) {
  self->state.init(self, std::move(manager), std::move(cfg), std::move(buf));
  self->set_down_handler([=](const caf::down_msg& dm) { self->state.member_down(dm); });
  return {
      [=](peer_atom, uint32_t j, caf::actor& a) { self->state.connected(j, a); },
      [=](hello_atom, uint32_t from, BufferHandle& mailbox, BufferHandle& coll) {
        self->state.hello(from, std::move(mailbox), std::move(coll));
      },
      [=](formed_atom) { return self->state.formed_reply(); },
      [=](send_atom, uint32_t j, uint64_t msg, uint64_t len, bool last) {
        return self->state.send(j, msg, len, last);
      },
      [=](cut_atom, uint32_t j, uint64_t msg) { self->state.cut(j, msg); },
      [=](recv_atom, uint32_t j) { return self->state.recv(j); },
      [=](unrecv_atom, uint32_t j, uint64_t len, bool last, uint64_t msg) {
        self->state.unrecv(j, Note{len, last, msg});
        return true;
      },
      [=](recv_done_atom, uint32_t j) { self->state.recv_done(j); },
      [=](chunk_atom, uint32_t from, uint64_t msg, uint64_t len, bool last) {
        self->state.chunk(from, Note{len, last, msg});
      },
      [=](credit_atom, uint32_t from) { self->state.credit(from); },
      [=](bcast_atom, uint64_t epoch, uint32_t root, uint64_t len, uint64_t total) {
        return self->state.start_collective(true, epoch, root, len, total);
      },
      [=](a2a_atom, uint64_t epoch, uint64_t block, uint64_t total) {
        return self->state.start_collective(false, epoch, 0, block, total);
      },
      [=](ready_atom, uint64_t epoch, uint32_t from, bool bcast, uint32_t root, uint64_t len,
          uint64_t total) {
        self->state.ready(epoch, from, Shape{bcast, root, len, total});
      },
      [=](written_atom, uint64_t epoch, uint32_t from, std::string& path) {
        self->state.written(epoch, from, path);
      },
      [=](left_atom, uint32_t from, std::string& cause) {
        self->state.left(from, cause);
        return true;
      },
      [=](leave_atom) { return self->state.leave(); },
      [=](abort_atom, uint64_t epoch, uint32_t from, uint8_t code, std::string& why) {
        self->state.aborted(epoch, from, static_cast<ErrorCode>(code), why);
      },
      [=](ended_atom, uint64_t epoch, uint32_t from) { self->state.ended(epoch, from); },
      [=](deadline_atom, uint8_t kind, uint64_t key, uint64_t id) {
        self->state.expired(kind, key, id);
      },
  };
}

}  // namespace

caf::actor spawn_group_member(caf::actor_system& sys, rdma_manager_actor manager,
                              MemberConfig config, MemberBuffers buffers) {
  return sys.spawn(member, std::move(manager), std::move(config), std::move(buffers));
}

}  // namespace caf_rdma::group
