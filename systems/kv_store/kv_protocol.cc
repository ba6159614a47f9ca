#include "systems/kv_store/kv_protocol.h"

namespace caf_rdma::kv {

void add_kv_message_types(caf::actor_system_config& cfg) {
  add_message_types(cfg);
  cfg.add_message_type<ValueInfo>("caf_rdma::kv::ValueInfo");
  cfg.add_message_type<ServerStats>("caf_rdma::kv::ServerStats");
  cfg.add_message_type<ServerInfo>("caf_rdma::kv::ServerInfo");
}

}  // namespace caf_rdma::kv
