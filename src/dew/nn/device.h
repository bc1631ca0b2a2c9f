#pragma once
// Device names in configs and flags ("auto", "cpu", "cuda", "cuda:N") -> a device LibTorch can use.
#include <c10/core/Device.h>

#include <string>

namespace dew::nn {

// "auto" -> a GPU when LibTorch sees one (cuda:LOCAL_RANK mod the GPU count, so each process of a
// multi-process job on a host takes its own; cuda:0 for one process), else cpu; "cpu", "cuda", "cuda:N" checked against the devices
// there are. Errors name `field` (the config field or flag the name came from) and the value.
c10::Device resolve_device(const std::string& device, const std::string& field = "trainer.device");

}  // namespace dew::nn
