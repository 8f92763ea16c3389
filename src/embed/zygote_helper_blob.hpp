#pragma once

#include <string_view>

namespace pysandbox::zygote {

// The zygote's helper library (inside/zygote_helper.cpp), as the build made it.
std::string_view helper_library();

}  // namespace pysandbox::zygote
