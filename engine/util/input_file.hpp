// Small text inputs a user names on the command line (config, evaluation text, workloads,
// hardware profiles), read whole. A FIFO or device would block open() or never end, and a
// huge or sparse file would be read into memory: each is refused with the file's name first.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cpullm {

// The bytes of `path`, a regular file of at most `max_bytes`. `what` names it in errors
// ("the config file": "cpullm: error: PATH: not a regular file (the config file)").
std::string read_input_file(const std::string& path, std::string_view what, std::uintmax_t max_bytes);

}  // namespace cpullm
