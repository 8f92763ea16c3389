// A classic-BPF evaluator for seccomp programs: what a compiled filter answers for one call,
// without loading it. --trace-syscalls asks it what the profile would do with each call the
// script makes; the unit tests ask it about sample calls of every profile.

#include <linux/bpf_common.h>

#include <array>
#include <cstring>

#include "plan/seccomp.hpp"

namespace pysandbox::seccomp {
namespace {

constexpr std::uint32_t kKillProcess = SECCOMP_RET_KILL_PROCESS;

// A 32-bit load from seccomp_data at `offset`, as the kernel does it (host byte order); an
// offset out of range or unaligned kills, as the kernel's checker would have refused it.
bool load_word(const seccomp_data& data, std::uint32_t offset, std::uint32_t& value) {
    if (offset % 4 != 0 || offset + 4 > sizeof data) return false;
    std::memcpy(&value, reinterpret_cast<const char*>(&data) + offset, 4);
    return true;
}

std::uint32_t alu(std::uint16_t op, std::uint32_t a, std::uint32_t operand, bool& ok) {
    switch (op) {
        case BPF_ADD: return a + operand;
        case BPF_SUB: return a - operand;
        case BPF_MUL: return a * operand;
        case BPF_DIV: ok = operand != 0; return ok ? a / operand : 0;
        case BPF_MOD: ok = operand != 0; return ok ? a % operand : 0;
        case BPF_AND: return a & operand;
        case BPF_OR: return a | operand;
        case BPF_XOR: return a ^ operand;
        case BPF_LSH: return operand < 32 ? a << operand : 0;
        case BPF_RSH: return operand < 32 ? a >> operand : 0;
        case BPF_NEG: return 0u - a;
    }
    ok = false;
    return 0;
}

bool jump_taken(std::uint16_t op, std::uint32_t a, std::uint32_t operand) {
    switch (op) {
        case BPF_JEQ: return a == operand;
        case BPF_JGT: return a > operand;
        case BPF_JGE: return a >= operand;
        case BPF_JSET: return (a & operand) != 0;
    }
    return false;
}

}  // namespace

std::uint32_t evaluate(std::span<const sock_filter> program, const seccomp_data& data) {
    std::uint32_t a = 0, x = 0;
    std::array<std::uint32_t, BPF_MEMWORDS> memory{};
    for (std::size_t pc = 0; pc < program.size(); ++pc) {
        const sock_filter& insn = program[pc];
        const std::uint16_t code = insn.code;
        const std::uint32_t k = insn.k;
        bool ok = true;
        switch (BPF_CLASS(code)) {
            case BPF_LD:
                if (BPF_MODE(code) == BPF_ABS && BPF_SIZE(code) == BPF_W)
                    ok = load_word(data, k, a);
                else if (BPF_MODE(code) == BPF_IMM)
                    a = k;
                else if (BPF_MODE(code) == BPF_MEM && k < BPF_MEMWORDS)
                    a = memory[k];
                else if (BPF_MODE(code) == BPF_LEN)
                    a = sizeof data;
                else
                    ok = false;
                break;
            case BPF_LDX:
                if (BPF_MODE(code) == BPF_IMM)
                    x = k;
                else if (BPF_MODE(code) == BPF_MEM && k < BPF_MEMWORDS)
                    x = memory[k];
                else if (BPF_MODE(code) == BPF_LEN)
                    x = sizeof data;
                else
                    ok = false;
                break;
            case BPF_ST:
            case BPF_STX:
                if (k >= BPF_MEMWORDS) return kKillProcess;
                memory[k] = BPF_CLASS(code) == BPF_ST ? a : x;
                break;
            case BPF_ALU: a = alu(BPF_OP(code), a, BPF_SRC(code) == BPF_X ? x : k, ok); break;
            case BPF_JMP:
                if (BPF_OP(code) == BPF_JA) {
                    pc += k;
                } else {
                    const bool taken = jump_taken(BPF_OP(code), a, BPF_SRC(code) == BPF_X ? x : k);
                    pc += taken ? insn.jt : insn.jf;
                }
                break;
            case BPF_RET: return BPF_RVAL(code) == BPF_A ? a : k;
            case BPF_MISC:
                if (BPF_MISCOP(code) == BPF_TAX)
                    x = a;
                else
                    a = x;
                break;
            default: ok = false;
        }
        if (!ok) return kKillProcess;
    }
    return kKillProcess;  // fell off the end: the kernel refuses such a program
}

}  // namespace pysandbox::seccomp
