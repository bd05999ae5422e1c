// Where a tensor lives. The model code never branches on this: ops dispatch on it.
#pragma once
#include <string_view>

namespace vlm {

enum class DeviceKind { CPU, CUDA };

constexpr std::string_view device_name(DeviceKind d) { return d == DeviceKind::CPU ? "cpu" : "cuda"; }

}  // namespace vlm
