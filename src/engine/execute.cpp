#include "engine/execute.hpp"

#include "engine/collect.hpp"
#include "engine/run_watch.hpp"

namespace pysandbox {

Outcome execute(const Plan& plan) {
    return collect(plan, watch_run(plan));
}

}  // namespace pysandbox
