// The environment at a node's start (actors/environment.h, RdmaNode::start): RdmaNode::start()
// applies the CAF_RDMA_* variables, a malformed one is an error naming it and what it may be,
// start(options) with the program's own ManagerOptions says which set variables it did not
// apply, and an unknown CAF_RDMA_* name is reported. Native (no device needed: the transport
// these cases ask for is the fallback, or one that fails before any device is opened).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "actors/environment.h"
#include "actors/rdma_client.h"
#include "actors/rdma_node.h"
#include "tests/scoped_env.h"

namespace caf_rdma::testing {
namespace {

std::string transport_of(RdmaNode& node) {
  RdmaClient client(node.system(), node.manager());
  auto s = client.stats();
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return s.ok() ? s->transport : "";
}

// Invariant: a malformed variable stops the start with its name and its allowed values, from
// the default start and from NodeOptions::from_env alike.
TEST(EnvironmentTest, AMalformedTransportIsAnErrorNamingTheVariableAndItsValues) {
  ScopedEnv bad("CAF_RDMA_TRANSPORT", "bogus");
  auto node = RdmaNode::start();
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(node.error().message().find("CAF_RDMA_TRANSPORT='bogus'"), std::string::npos)
      << node.error().message();
  EXPECT_NE(node.error().message().find("auto, rdma or fallback"), std::string::npos)
      << node.error().message();
  auto options = NodeOptions::from_env();
  ASSERT_FALSE(options.ok());
  // Taking the value anyway is a BadResultAccess that says the same, not bad_variant_access.
  try {
    (void)*options;
    ADD_FAILURE() << "the value of an error was taken";
  } catch (const BadResultAccess& e) {
    EXPECT_NE(std::string(e.what()).find("CAF_RDMA_TRANSPORT='bogus'"), std::string::npos)
        << e.what();
  }
}

// The default start applies the environment; start(options) with the program's own
// ManagerOptions does not, and says so (environment.h invariant 2).
TEST(EnvironmentTest, TheDefaultStartAppliesTheEnvironmentAndAnExplicitOneSaysWhatItIgnored) {
  ScopedEnv fallback("CAF_RDMA_TRANSPORT", "fallback");
  {
    ::testing::internal::CaptureStderr();
    auto node = RdmaNode::start();
    std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(node.ok()) << node.error().to_string();
    EXPECT_EQ(transport_of(**node), "fallback");
    EXPECT_EQ(said.find("not applied"), std::string::npos) << said;
  }
  {
    ::testing::internal::CaptureStderr();
    auto node = RdmaNode::start(NodeOptions{});
    std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(node.ok()) << node.error().to_string();
    EXPECT_EQ(transport_of(**node), "auto");
    EXPECT_NE(said.find("CAF_RDMA_TRANSPORT set but not applied"), std::string::npos) << said;
  }
  {
    NodeOptions o;
    auto env = ManagerOptions::from_env();
    ASSERT_TRUE(env.ok());
    o.manager = *env;
    auto node = RdmaNode::start(o);
    ASSERT_TRUE(node.ok()) << node.error().to_string();
    EXPECT_EQ(transport_of(**node), "fallback");
  }
}

// A scheduler CAF has but caf-rdma cannot run on ("testing" runs nothing by itself: the start
// waited for ever) is refused at start, naming the variable and the choices.
TEST(EnvironmentTest, ASchedulerNodesCannotRunOnIsRefusedAtStart) {
  for (const char* bad : {"testing", "fifo"}) {
    ScopedEnv scheduler("CAF_RDMA_SCHEDULER", bad);
    auto node = RdmaNode::start(NodeOptions{});
    ASSERT_FALSE(node.ok()) << bad;
    EXPECT_EQ(node.error().code(), ErrorCode::kInvalidArgument);
    for (const std::string& frag : {std::string("CAF_RDMA_SCHEDULER=") + bad,
                                    std::string("stealing"), std::string("sharing")})
      EXPECT_NE(node.error().message().find(frag), std::string::npos) << node.error().message();
  }
  ScopedEnv sharing("CAF_RDMA_SCHEDULER", "sharing");
  auto node = RdmaNode::start(NodeOptions{});
  ASSERT_TRUE(node.ok()) << node.error().to_string();
}

// environment.h invariant 1: a misspelt variable is named at start, not silently ignored.
TEST(EnvironmentTest, AnUnknownCafRdmaVariableIsReported) {
  ScopedEnv typo("CAF_RDMA_TRANSPROT", "rdma");
  auto unknown = unknown_environment_variables();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "CAF_RDMA_TRANSPROT"), unknown.end());
  {
    ::testing::internal::CaptureStderr();
    auto node = RdmaNode::start(NodeOptions{});
    std::string said = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(node.ok()) << node.error().to_string();
    EXPECT_NE(said.find("unknown environment variable CAF_RDMA_TRANSPROT"), std::string::npos)
        << said;
    // The node is named with its port (HOST:PORT: "127.0.0.1:" alone named no node).
    EXPECT_NE(said.find((*node)->address() + ": unknown environment variable"), std::string::npos)
        << said;
  }
  // Every variable caf-rdma reads is known (none of them is reported).
  for (const auto& v : environment_variables()) {
    ScopedEnv set(v.name, "1");
    auto now = unknown_environment_variables();
    EXPECT_EQ(std::find(now.begin(), now.end(), v.name), now.end()) << v.name;
  }
}

// primitives/log.h invariant 2: a bad CAF_RDMA_LOG stops the start, naming it and its values.
TEST(EnvironmentTest, ABadLogLevelIsAnErrorNamingTheVariable) {
  ScopedEnv loud("CAF_RDMA_LOG", "loud");
  auto node = RdmaNode::start();
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(node.error().message().find("CAF_RDMA_LOG=loud"), std::string::npos)
      << node.error().message();
}

// The node's start line names its transport and address, or why it has no RDMA (here: the
// fallback was asked for), and the stream channel's address.
TEST(EnvironmentTest, ANodeSaysAtStartWhichTransportItUsesAndWhy) {
  ScopedEnv fallback("CAF_RDMA_TRANSPORT", "fallback");
  ::testing::internal::CaptureStderr();
  auto node = RdmaNode::start();
  ASSERT_TRUE(node.ok()) << node.error().to_string();
  (void)transport_of(**node);  // a round trip: the start line is out by then
  std::string said = ::testing::internal::GetCapturedStderr();
  const std::string address = (*node)->address();
  EXPECT_NE(said.find("caf-rdma info: " + address + ": started, transport fallback"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("CAF_RDMA_TRANSPORT=fallback"), std::string::npos) << said;
  EXPECT_NE(said.find("stream channel on 127.0.0.1:"), std::string::npos) << said;
}

}  // namespace
}  // namespace caf_rdma::testing
