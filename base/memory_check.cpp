// Implementation of the memory checks (see memory_check.h).
#include "base/memory_check.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace vlm {

uint64_t allocatable_bytes() {
  uint64_t avail = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        avail = uint64_t(kib) * 1024;
        break;
      }
    std::fclose(f);
  }
  if (avail == 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    avail = pages > 0 && page > 0 ? mul_sat(uint64_t(pages), uint64_t(page)) : UINT64_MAX;
  }
  struct rlimit as {};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && uint64_t(as.rlim_cur) < avail)
    avail = uint64_t(as.rlim_cur);
  return avail;
}

std::string format_bytes(double b) {
  char buf[32];
  if (b >= double(1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= double(1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string format_bytes_exact(uint64_t b) {
  return b < 1024 ? format_bytes(double(b)) : format_bytes(double(b)) + " (" + std::to_string(b) + " B)";
}

void require_allocatable(uint64_t bytes, std::string_view what) {
  const uint64_t avail = allocatable_bytes();
  if (bytes <= avail) return;
  const double gib = double(uint64_t(1) << 30);
  char need[32], have[32];
  std::snprintf(need, sizeof need, "%.1f GiB", double(bytes) / gib);
  std::snprintf(have, sizeof have, "%.1f GiB", double(avail) / gib);
  if (bytes == UINT64_MAX) std::snprintf(need, sizeof need, "more than 2^64 bytes");
  throw UserError(cat(what, ": needs ", need, ", more than the ", have, " of memory available"));
}

}  // namespace vlm
