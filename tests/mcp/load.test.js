// Load through MCP: 500 run_python calls, 4 at a time, through the official TypeScript SDK,
// mixing code that succeeds, raises, times out, exhausts memory and floods its output (the
// kinds of tests/load/test_load.py). Every call must get its right answer, the server's RSS and
// open fds must be as flat at the end as after a warm-up, and closing its stdin must leave no
// process behind.
//
//   PYSANDBOX=$PWD/build/bin/pysandbox PYSANDBOX_AS=nobody node --test tests/mcp/load.test.js
//
// PYSANDBOX_LOAD_RUNS changes the number of calls (default 500), as for tests/load.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import {
  McpServer, TIME_SLACK, descendants, openFds, present, poll, rssKiB, textOf,
} from './support.js';

const CALLS = Number(process.env.PYSANDBOX_LOAD_RUNS ?? 500);
const PARALLEL = 4;
const WARM_UP = Math.ceil(CALLS / 5);  // 100 calls, 20 of each kind, before the baseline
const OUTPUT_LIMIT = 64 * 1024;
const FLOOD_LINE = 'y'.repeat(99) + '\n';
const FLOOD_LINES = 20_000;  // 2 MB, far over the limit
// Between the two idle readings run 400 calls. A leak of 2.6 KiB a call -- one result object
// of a small run, a fraction of one flood's kept output -- adds up to more than this; the
// allocator's own drift once its arenas have seen the warm-up's 20 floods is far less.
const RSS_GROWTH_SLACK_KIB = 1024;
// Under ASan freed memory waits in a 256 MiB quarantine, so RSS grows without any leak; there
// LeakSanitizer checks for leaks when the server exits (McpServer.close wants exit status 0).
const CHECK_RSS = !process.env.PYSANDBOX_SANITIZED;

// The default profile with tests/load's limits: 64 MiB of memory, 64 KiB of output. In a
// pysandbox-it- directory: the other suites' leftover checks know it for a test's own
// (harness.TEST_HELPER_PREFIXES), so running beside them does not fail them.
function loadProfile() {
  const dir = fs.mkdtempSync('/tmp/pysandbox-it-mcp-load-');
  fs.chmodSync(dir, 0o755);
  const file = path.join(dir, 'load.toml');
  fs.writeFileSync(file, 'extends = "default"\ndescription = "tests/mcp/load.test.js"\n' +
                         '[limits]\nmemory = "64MiB"\noutput_limit = "64KiB"\n', { mode: 0o644 });
  return { dir, file };
}

const KINDS = [
  {
    name: 'ok',
    args: i => ({ code: `print("ok", ${i})\n` }),
    check(result, i) {
      assert.equal(result.structuredContent.status, 'ok');
      assert.equal(result.isError ?? false, false);
      assert.equal(result.structuredContent.stdout, `ok ${i}\n`);
      assert.deepEqual(result.content, [{ type: 'text', text: `ok ${i}\n` }]);
    },
  },
  {
    name: 'exception',
    args: i => ({ code: `raise ValueError("boom ${i}")\n` }),
    check(result, i) {
      const { status, exception } = result.structuredContent;
      assert.equal(status, 'exception');
      assert.equal(result.isError, true);
      assert.equal(exception.type, 'ValueError');
      assert.equal(exception.message, `boom ${i}`);
      assert.ok(textOf(result).includes(exception.traceback));
    },
  },
  {
    name: 'timeout',
    args: () => ({ code: 'import time\nprint("started", flush=True)\ntime.sleep(60)\n',
                   timeout: 0.5 }),
    check(result) {
      assert.equal(result.structuredContent.status, 'timeout');
      assert.equal(result.isError, true);
      // The limit counts the interpreter's start too (a cold one, when the pool is empty).
      assert.ok(['', 'started\n'].includes(result.structuredContent.stdout));
    },
  },
  {
    name: 'memory',
    args: () => ({ code: 'blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n' }),
    check(result) {
      assert.equal(result.structuredContent.status, 'memory_limit');
      assert.equal(result.isError, true);
    },
  },
  {
    name: 'output_limit',
    args: () => ({ code: `import sys\nfor _ in range(${FLOOD_LINES}):\n` +
                         `    sys.stdout.write(${JSON.stringify(FLOOD_LINE)})\n` }),
    check(result) {
      const { status, stdout, truncated, bytes } = result.structuredContent;
      assert.equal(status, 'output_limit');
      assert.equal(result.isError, true);
      assert.equal(truncated.stdout, true);
      assert.equal(bytes.stdout, FLOOD_LINE.length * FLOOD_LINES);
      const marker = /\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n/.exec(stdout);
      assert.ok(marker, stdout.slice(-200));
      const kept = Buffer.byteLength(stdout) - Buffer.byteLength(marker[0]);
      assert.equal(Number(marker[1]) + kept, FLOOD_LINE.length * FLOOD_LINES);
      assert.ok(kept <= OUTPUT_LIMIT, `kept ${kept} bytes`);
      assert.ok(stdout.startsWith(FLOOD_LINE) && stdout.endsWith(FLOOD_LINE));
      // What the model reads is bounded like the result.
      assert.ok(textOf(result).length <= 2 * OUTPUT_LIMIT + 4096, `${textOf(result).length}`);
    },
  },
];

// Runs calls [from, to) PARALLEL at a time; returns the failures.
async function runCalls(server, from, to, onDone) {
  const failures = [];
  let next = from;
  const worker = async () => {
    while (next < to) {
      const i = next++;
      const kind = KINDS[i % KINDS.length];
      try {
        kind.check(await server.runPython(kind.args(i)), i);
      } catch (error) {
        failures.push(`call ${i} (${kind.name}): ${error.message}`.slice(0, 1500));
      }
      onDone();
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return failures;
}

// The server idle: no call in flight, its pool refilled. Waits until its fds and the processes
// below it have not changed for 10 polls 20 ms apart; returns what it saw then.
async function idle(pid) {
  let last = '';
  let same = 0;
  let state = null;
  const settled = await poll(() => {
    state = { fds: openFds(pid), processes: descendants(pid), rss: rssKiB(pid) };
    const key = JSON.stringify([state.fds, state.processes]);
    same = key === last ? same + 1 : 0;
    last = key;
    return same >= 10;
  }, { timeoutMs: 30_000 * TIME_SLACK, intervalMs: 20 });
  assert.ok(settled, `the server did not settle: ${JSON.stringify(state)}`);
  return state;
}

// An fd as its kind and target, without the numbers that differ between equal things: inodes,
// and the process of a /proc directory (the warm sandbox's interpreter, held from its ready on,
// is another process at the end than after the warm-up).
const fdKind = entry => entry.replace(/^\d+ -> /, '').replace(/\[\d+\]/, '[]')
  .replace(/^\/proc\/\d+$/, '/proc/PID');

test(`${CALLS} calls, ${PARALLEL} at a time, mixed outcomes: all answered, the server flat`,
     { timeout: 1_200_000 }, async t => {
  const profile = loadProfile();
  t.after(() => fs.rmSync(profile.dir, { recursive: true, force: true }));
  const server = await McpServer.start(['-p', profile.file, '--pool', '1']);
  const seen = new Map();  // every process ever seen below the server, by pid and start time
  const look = () => descendants(server.pid).forEach(p => seen.set(`${p.pid}/${p.start}`, p));
  let done = 0;
  const rssSamples = [];
  const onDone = () => {
    if (++done % 25 === 0) {
      look();
      rssSamples.push(rssKiB(server.pid));
    }
  };
  try {
    const start = performance.now();
    const failures = await runCalls(server, 0, WARM_UP, onDone);
    const warm = await idle(server.pid);
    failures.push(...await runCalls(server, WARM_UP, CALLS, onDone));
    const elapsed = (performance.now() - start) / 1000;
    const end = await idle(server.pid);
    look();

    t.diagnostic(`${CALLS} calls in ${elapsed.toFixed(1)} s; server RSS idle after the ` +
                 `warm-up ${warm.rss} KiB, at the end ${end.rss} KiB, while running ` +
                 `${Math.min(...rssSamples)}..${Math.max(...rssSamples)} KiB; ` +
                 `open fds ${warm.fds.length} -> ${end.fds.length}`);
    assert.deepEqual(failures, [], `${failures.length} of ${CALLS} calls went wrong`);
    assert.deepEqual(server.errors.map(String), []);
    assert.deepEqual(end.fds.map(fdKind).sort(), warm.fds.map(fdKind).sort(),
                     'the server\'s open fds changed between the warm-up and the end');
    if (CHECK_RSS) {
      assert.ok(end.rss <= warm.rss + RSS_GROWTH_SLACK_KIB,
                `the server's RSS grew from ${warm.rss} KiB to ${end.rss} KiB`);
    }
    assert.ok(seen.size > 0, 'no sandbox was ever seen below the server');
    await server.close();
  } finally {
    await server.close().catch(() => {});  // after a failure above: no second report
  }
  const gone = await poll(() => [...seen.values()].every(p => !present(p)),
                          { timeoutMs: 5000 * TIME_SLACK, intervalMs: 10 });
  assert.ok(gone, 'left behind after stdin closed: ' +
                  JSON.stringify([...seen.values()].filter(p => present(p))));
});
