// open_device: the one place a manager opens an RDMA device (its primary at start and after the
// device was lost, and its rails): ManagerOptions::open_nic when given (a test's fake NIC), else
// RdmaDomain::open (ibverbs). Nothing else in actors/ names the real device's class.
#pragma once

#include <memory>

#include "actors/rdma_manager_actor.h"
#include "components/nic.h"
#include "primitives/ibverbs_config.h"
#include "primitives/status.h"

namespace caf_rdma::detail {

/// Opens the device `config` selects, as `options` says (see above).
Result<std::shared_ptr<Nic>> open_device(const ManagerOptions& options,
                                         const IbverbsConfig& config);

}  // namespace caf_rdma::detail
