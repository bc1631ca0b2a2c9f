#pragma once
// Device names in configs and flags ("auto", "cpu", "cuda", "cuda:N") -> a device LibTorch can use.
#include <c10/core/Device.h>

#include <string>

namespace dew::nn {

// "auto" -> cuda:0 when LibTorch sees a GPU, else cpu; "cpu", "cuda", "cuda:N" checked against the devices
// there are. Errors name `field` (the config field or flag the name came from) and the value.
c10::Device resolve_device(const std::string& device, const std::string& field = "trainer.device");

}  // namespace dew::nn
