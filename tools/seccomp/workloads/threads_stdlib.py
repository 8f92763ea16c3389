"""default-profile style: threads, queue, ThreadPoolExecutor, asyncio (no subprocess, no sockets
beyond socketpair used by asyncio's self-pipe)."""
import asyncio
import concurrent.futures
import queue
import threading
import time


def worker(q, out):
    while True:
        item = q.get()
        if item is None:
            break
        out.append(item * item)


async def tick(n):
    await asyncio.sleep(0.01)
    return n * 2


async def amain():
    r = await asyncio.gather(*(tick(i) for i in range(20)))
    loop = asyncio.get_running_loop()
    r2 = await loop.run_in_executor(None, sum, range(1000))
    q = asyncio.Queue()
    await q.put(1)
    await asyncio.wait_for(q.get(), 1)
    return sum(r) + r2


def main():
    q, out = queue.Queue(), []
    ts = [threading.Thread(target=worker, args=(q, out)) for _ in range(4)]
    for t in ts:
        t.start()
    for i in range(1000):
        q.put(i)
    for _ in ts:
        q.put(None)
    for t in ts:
        t.join()
    lock, ev, cond = threading.Lock(), threading.Event(), threading.Condition()
    with lock:
        pass
    threading.Timer(0.01, ev.set).start()
    ev.wait(1)
    with cond:
        cond.wait(0.01)
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        r = list(ex.map(lambda x: x + 1, range(100)))
    print("threads", len(out), sum(r), asyncio.run(amain()))
    time.sleep(0.005)


if __name__ == "__main__":
    main()
