# DoS (robustness): -j 256 trivial jobs; supervisor blocks in sendmsg to the zygote channel while the zygote blocks
# in send back (both SOCK_SEQPACKET buffers full) -> permanent deadlock, no deadline fires.
# Observed c5619ab: root, -j 256: 0 results after 90 s; wchan of both = sock_alloc_send_pskb. -j 128/192: 14 ETOOMANYREFS sandbox_errors.
import json
ARGS = ["-j", "256"]
HOST_TIMEOUT = 90
JOBS = [{"id": i, "code": "print(%d)" % i} for i in range(1, 401)]
def check(results, who):
    st = {}
    for r in results.values(): st[r["status"]] = st.get(r["status"], 0) + 1
    return f"{len(results)} results {st}"
