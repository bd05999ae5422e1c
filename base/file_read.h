// Bounded reading of a whole file that the user named (config, JSON, tokenizer, captions,
// image files): a directory, an unreadable path, a file above the caller's limit or
// above what can be allocated is a UserError naming the path, checked before the bytes
// are allocated. Devices and pipes (/dev/stdin, <(...)) are read up to the smaller of the
// limit and kStreamLimit, so an endless input such as /dev/zero ends with "larger than"
// instead of exhausting memory; a named pipe that no program writes to within 5 s is
// refused instead of waited for.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace vlm {

inline constexpr uint64_t kStreamLimit = uint64_t(256) << 20;  // bytes read from a pipe or device

// The bytes of `path`; `kind` names what the file should be in messages
// ("config file", "JSON file", ...): "<path>: <kind> is larger than the limit of N bytes".
std::string read_file_bounded(const std::string& path, uint64_t max_bytes, std::string_view kind);

// For readers that open a path themselves (HDF5, zlib): refuses `path` when it exists and
// is not a regular file (a named pipe would block the open until a program writes it):
// "<path>: not a regular file (expected <what>)", what = "an HDF5 file". A missing path is
// the reader's to report.
void require_regular_if_present(const std::string& path, std::string_view what);

}  // namespace vlm
