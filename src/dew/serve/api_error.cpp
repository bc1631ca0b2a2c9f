#include "dew/serve/api_error.h"

namespace dew::serve {

void invalid_field(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError(400, message, param, code);
}

nlohmann::ordered_json error_body(const ApiError& error) {
  nlohmann::ordered_json inner;
  inner["message"] = error.what();
  inner["type"] = error.type();
  inner["param"] = error.param().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(error.param());
  inner["code"] = error.code().empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(error.code());
  nlohmann::ordered_json body;
  body["error"] = std::move(inner);
  return body;
}

std::string error_text(const ApiError& error) {
  return error_body(error).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string error_type_for_status(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace dew::serve
