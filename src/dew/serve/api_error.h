#pragma once
// An error as the OpenAI API reports it: an HTTP status and
//   {"error": {"message": ..., "type": ..., "param": FIELD or null, "code": ... or null}}
// Everything a request can get wrong (parsing, validation, a full queue, an unknown model) is thrown as
// ApiError by the protocol layer and turned into that body by the HTTP layer, so clients such as the
// `openai` Python package raise their matching exception (BadRequestError for 400, ...).
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace dew::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)),
        type_(std::move(type)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }  // "" = null
  const std::string& code() const { return code_; }    // "" = null
  const std::string& type() const { return type_; }

 private:
  int status_;
  std::string param_, code_, type_;
};

// A 400 naming the field: "invalid_request_error", code "invalid_value" unless given.
[[noreturn]] void invalid_field(const std::string& param, const std::string& message,
                                const std::string& code = "invalid_value");

// The JSON body for an error ({"error": {...}}).
nlohmann::ordered_json error_body(const ApiError& error);
// The error's JSON text, with invalid UTF-8 in a message replaced rather than throwing.
std::string error_text(const ApiError& error);

// The error type for a status: 401 authentication_error, 403 permission_error, 404 not_found_error,
// 429 rate_limit_error, 5xx server_error, any other invalid_request_error.
std::string error_type_for_status(int status);

}  // namespace dew::serve
