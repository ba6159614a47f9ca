// Tests of actors/transfer/owner_verdict.h: the one rule by which the manager's RDMA path and
// RdmaClient's direct lanes answer an op the NIC failed, once its owner was asked. Each case
// names the invariant it checks. Pure: no actor system, no device.
#include "actors/transfer/owner_verdict.h"

#include <gtest/gtest.h>

#include <string>

namespace caf_rdma::detail {
namespace {

TransferOp read_op() {
  TransferOp op;
  op.kind = wire_kind(TransferKind::kRead);
  op.remote.id = 7;
  op.remote.owner_name = "owner:2";
  return op;
}

const Error kNic(ErrorCode::kWorkCompletion, "remote access error (IBV_WC_REM_ACCESS_ERR)");

TransferOutcome owner_says(ErrorCode code, const std::string& why) {
  TransferOutcome o;
  o.code = static_cast<uint8_t>(code);
  o.message = why;
  return o;
}

bool has(const Error& e, const std::string& text) {
  return e.message().find(text) != std::string::npos;
}

TEST(OwnerVerdictTest, Invariant0EveryFailureTheNicReportedAsksTheOwner) {
  EXPECT_TRUE(asks_owner(OpFault::kRemoteAccess));
  EXPECT_TRUE(asks_owner(OpFault::kFlushed));
  EXPECT_TRUE(asks_owner(OpFault::kOther));
  EXPECT_FALSE(asks_owner(OpFault::kNone)) << "failed before the NIC: nothing to ask";
}

TEST(OwnerVerdictTest, Invariant1TheOwnersRefusalExplainsARefusalOrAFlush) {
  const Result<TransferOutcome> refused = owner_says(ErrorCode::kReleased, "buffer 7 was released");
  for (OpFault fault : {OpFault::kRemoteAccess, OpFault::kFlushed}) {
    Error e = owner_verdict(read_op(), kNic, fault, refused);
    EXPECT_EQ(e.code(), ErrorCode::kReleased) << e.to_string();
    EXPECT_TRUE(has(e, "refused by the owner of")) << e.to_string();
    EXPECT_TRUE(has(e, "buffer 7 was released")) << e.to_string();
  }
}

TEST(OwnerVerdictTest, Invariant2AnOwnerThatAllowsItOrAnotherFailureLeavesTheNicsError) {
  TransferOutcome fine;
  Error e = owner_verdict(read_op(), kNic, OpFault::kRemoteAccess, fine);
  EXPECT_EQ(e.code(), kNic.code());
  EXPECT_EQ(e.message(), kNic.message());
  // Retries exhausted is not a refusal: an owner's objection does not explain it.
  const Result<TransferOutcome> refused = owner_says(ErrorCode::kOutOfBounds, "past the end");
  e = owner_verdict(read_op(), kNic, OpFault::kOther, refused);
  EXPECT_EQ(e.code(), kNic.code());
  EXPECT_EQ(e.message(), kNic.message());
}

TEST(OwnerVerdictTest, Invariant3AnOwnerKnownDownIsPeerUnavailable) {
  const Result<TransferOutcome> down =
      Error(ErrorCode::kPeerUnavailable, "owner:2 is down (its node stopped)");
  for (OpFault fault : {OpFault::kRemoteAccess, OpFault::kFlushed, OpFault::kOther}) {
    Error e = owner_verdict(read_op(), kNic, fault, down);
    EXPECT_EQ(e.code(), ErrorCode::kPeerUnavailable) << e.to_string();
    EXPECT_TRUE(has(e, "owner:2 is down")) << e.to_string();
  }
}

TEST(OwnerVerdictTest, Invariant4ASilentOwnerLeavesTheNicsCodeAndSaysItWasSilent) {
  const Result<TransferOutcome> silent = Error(ErrorCode::kInternal, "the question was dropped");
  Error e = owner_verdict(read_op(), kNic, OpFault::kRemoteAccess, silent);
  EXPECT_EQ(e.code(), kNic.code()) << e.to_string();
  EXPECT_TRUE(has(e, kNic.message())) << e.to_string();
  EXPECT_TRUE(has(e, "its owner did not say why")) << e.to_string();
  EXPECT_TRUE(has(e, "the question was dropped")) << e.to_string();
}

}  // namespace
}  // namespace caf_rdma::detail
