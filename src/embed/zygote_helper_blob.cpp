// The zygote's helper (inside/zygote_helper.cpp), as built: its bytes, which a zygote's plan writes
// into its sandbox (plan.cpp).

#include <string_view>

#include "embed/zygote_helper_blob.hpp"

// PYSANDBOX_ZYGOTE_HELPER is the built library's path (CMakeLists.txt).
asm(R"(
    .section .rodata.pysandbox_zygote_helper, "a"
    .balign 64
    pysandbox_zygote_helper_begin:
    .incbin ")" PYSANDBOX_ZYGOTE_HELPER R"("
    pysandbox_zygote_helper_end:
    .previous
)");

extern "C" const char pysandbox_zygote_helper_begin[];
extern "C" const char pysandbox_zygote_helper_end[];

namespace pysandbox::zygote {

std::string_view helper_library() {
    return {pysandbox_zygote_helper_begin,
            static_cast<std::size_t>(pysandbox_zygote_helper_end - pysandbox_zygote_helper_begin)};
}

}  // namespace pysandbox::zygote
