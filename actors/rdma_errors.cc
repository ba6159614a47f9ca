#include "actors/rdma_errors.h"

#include <caf/atom.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace caf_rdma {

caf::error make_rdma_error(ErrorCode code, std::string message) {
  return caf::make_error(static_cast<rdma_errc>(code), std::move(message));
}

caf::error to_caf_error(const Error& error) {
  return make_rdma_error(error.code(), error.message());
}

ErrorCode error_code(const caf::error& error) {
  if (error.category() != caf::detail::error_factory<rdma_errc>::category)
    return ErrorCode::kInternal;
  return static_cast<ErrorCode>(error.code());
}

ErrorCode request_error_code(const caf::error& error) {
  if (error.category() != caf::atom("system"))
    return error_code(error);
  switch (static_cast<caf::sec>(error.code())) {
    case caf::sec::request_timeout:
      return ErrorCode::kTimeout;
    case caf::sec::request_receiver_down:
    case caf::sec::remote_linking_failed:
      return ErrorCode::kPeerUnavailable;
    default:
      return ErrorCode::kInternal;
  }
}

Error to_error(const caf::error& error) {
  return Error(request_error_code(error), error_message(error));
}

std::string error_message(const caf::error& error) {
  if (!error)
    return "no error";
  const caf::message& ctx = error.context();
  if (error.category() == caf::detail::error_factory<rdma_errc>::category) {
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      return ctx.get_as<std::string>(0);
    return std::string(to_string(static_cast<ErrorCode>(error.code())));
  }
  if (error.category() == caf::atom("system"))
    return "CAF: " + to_string(static_cast<caf::sec>(error.code())) +
           (ctx.empty() ? "" : " " + to_string(ctx));
  return "error " + std::to_string(error.code()) + " in category " + to_string(error.category()) +
         (ctx.empty() ? "" : " " + to_string(ctx));
}

}  // namespace caf_rdma
