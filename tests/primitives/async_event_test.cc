// classify_async_event and AsyncEvent::describe: what each ibverbs async event means to a user.
#include "primitives/async_event.h"

#include <gtest/gtest.h>

namespace caf_rdma {
namespace {

TEST(AsyncEvent, EveryEventTypeHasTheMeaningUsersActOn) {
  EXPECT_EQ(classify_async_event(IBV_EVENT_DEVICE_FATAL), DeviceEventKind::kLost);
  EXPECT_EQ(classify_async_event(IBV_EVENT_PORT_ERR), DeviceEventKind::kPortDown);
  EXPECT_EQ(classify_async_event(IBV_EVENT_PORT_ACTIVE), DeviceEventKind::kPortUp);
  EXPECT_EQ(classify_async_event(IBV_EVENT_GID_CHANGE), DeviceEventKind::kGidChange);
  for (auto t : {IBV_EVENT_CQ_ERR, IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR,
                 IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_SRQ_ERR, IBV_EVENT_PATH_MIG_ERR})
    EXPECT_EQ(classify_async_event(t), DeviceEventKind::kQueueError) << ibv_event_type_str(t);
  for (auto t : {IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED, IBV_EVENT_PATH_MIG, IBV_EVENT_LID_CHANGE,
                 IBV_EVENT_PKEY_CHANGE, IBV_EVENT_SM_CHANGE, IBV_EVENT_SRQ_LIMIT_REACHED,
                 IBV_EVENT_QP_LAST_WQE_REACHED, IBV_EVENT_CLIENT_REREGISTER})
    EXPECT_EQ(classify_async_event(t), DeviceEventKind::kInfo) << ibv_event_type_str(t);
}

TEST(AsyncEvent, DescriptionNamesThePortOrQueuePair) {
  AsyncEvent port;
  port.type = IBV_EVENT_PORT_ERR;
  port.port = 2;
  EXPECT_EQ(port.describe(), std::string("port 2: ") + ibv_event_type_str(IBV_EVENT_PORT_ERR));
  AsyncEvent qp;
  qp.type = IBV_EVENT_QP_FATAL;
  qp.qp_num = 17;
  EXPECT_EQ(qp.describe(), std::string("QP 17: ") + ibv_event_type_str(IBV_EVENT_QP_FATAL));
  AsyncEvent fatal;
  EXPECT_EQ(fatal.describe(), ibv_event_type_str(IBV_EVENT_DEVICE_FATAL));
  EXPECT_STREQ(to_string(DeviceEventKind::kLost), "device lost");
}

}  // namespace
}  // namespace caf_rdma
