// Whole-file writes that are all-or-nothing: temp file in the same directory,
// fsync, rename over the target. A crash leaves the old file or the new one.
#pragma once

#include <string>

namespace mambarl {
void write_file_atomically(const std::string& path, const std::string& contents);
}
