// open_device: how a manager opens an RDMA device (see open_device.h).
#include "actors/transport/open_device.h"

#include "components/rdma_domain.h"

namespace caf_rdma::detail {

Result<std::shared_ptr<Nic>> open_device(const ManagerOptions& options,
                                         const IbverbsConfig& config) {
  if (options.open_nic)
    return options.open_nic(config);
  CAF_RDMA_ASSIGN_OR_RETURN(auto domain, RdmaDomain::open(config));
  return std::shared_ptr<Nic>(std::move(domain));
}

}  // namespace caf_rdma::detail
