#include "execute.hpp"

#include "collect.hpp"
#include "supervisor.hpp"

namespace pysandbox {

Outcome execute(const Plan& plan) {
    return collect(plan, supervise(plan));
}

}  // namespace pysandbox
