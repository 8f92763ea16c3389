// Progress: a tools/call that carries _meta.progressToken (the SDK sends one when the request
// has an `onprogress` option) gets the code's stdout and stderr as notifications/progress while
// it runs, at most one every 50 ms, within the output limit; the result is what it would be
// without. Through the official TypeScript SDK's Client, as root and as nobody.
//
//   npm ci --prefix tests/mcp
//   PYSANDBOX=$PWD/build/bin/pysandbox PYSANDBOX_AS=root node --test tests/mcp/progress.test.js

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { McpServer, TIME_SLACK, textOf } from './support.js';

// A call whose notifications are kept with the moment each came, and whether the result had.
async function withProgress(server, args) {
  const notes = [];
  let settled = false;
  const onprogress = progress => notes.push({ at: performance.now(), settled, ...progress });
  const result = await server.runPython(args, { onprogress }).finally(() => { settled = true; });
  return { result, notes, resultAt: performance.now() };
}

// What the SDK reported, judged against the messages as the server sent them. No progress
// notification may follow its call's response. One sent just before the response can still be
// reported as "for an unknown token": the SDK runs notification handlers a microtask later than
// it takes a response from the same read, so it has forgotten the token by then. That one is
// the SDK's, and only that one is forgiven.
function assertNoProgressAfterResult(server) {
  const answered = new Set();
  for (const message of server.received) {
    if (message.id !== undefined && message.method === undefined) answered.add(message.id);
    const token = message.method === 'notifications/progress' ? message.params?.progressToken
                                                              : undefined;
    assert.ok(token === undefined || !answered.has(token),
              `a progress notification came after its call's result: ${JSON.stringify(message)}`);
  }
  const unexpected = server.errors.filter(error => {
    const sent = /^Received a progress notification for an unknown token: (.*)$/s
      .exec(error.message)?.[1];
    if (sent === undefined) return true;
    const { progressToken, progress } = JSON.parse(sent).params ?? {};
    const at = server.received.findIndex(m => m.method === 'notifications/progress' &&
                                              m.params?.progressToken === progressToken &&
                                              m.params?.progress === progress);
    const answer = server.received.findIndex(m => m.id === progressToken &&
                                                  m.method === undefined);
    return at < 0 || answer < 0 || at > answer;
  });
  assert.deepEqual(unexpected, []);
}

function assertIncreasing(notes) {
  for (let i = 1; i < notes.length; ++i) {
    assert.ok(notes[i].progress > notes[i - 1].progress,
              `progress must increase: ${JSON.stringify(notes.map(n => n.progress))}`);
  }
}

describe('notifications/progress through the official TypeScript SDK', { timeout: 600_000 }, () => {
  let server;
  before(async () => { server = await McpServer.start(); });
  after(async () => { await server?.close(); });

  test('a flushed line reaches the client while the code still runs', async () => {
    await server.runPython({ code: 'import time' });  // a warm sandbox for the call below
    const { result, notes, resultAt } = await withProgress(server, {
      code: "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')",
    });
    assert.equal(result.structuredContent.status, 'ok', textOf(result));
    assert.ok(notes.length >= 1, 'no progress notification came');
    assert.equal(notes[0].message, 'first\n');
    assert.equal(notes[0].settled, false, 'the first notification came after the result');
    assert.ok(resultAt - notes[0].at > 1500 / TIME_SLACK,
              `the flushed line came ${(resultAt - notes[0].at) | 0} ms before the result: ` +
              'it was held back');
    assertIncreasing(notes);
    assert.ok('first\nsecond\n'.startsWith(notes.map(n => n.message).join('')));
    assert.ok(notes.every(n => !n.settled), 'every notification comes before the result');
    // The result is the same as without progress.
    assert.equal(result.structuredContent.stdout, 'first\nsecond\n');
    assert.equal(textOf(result), 'first\nsecond\n');
    assertNoProgressAfterResult(server);
  });

  test('stdout and stderr in the order they came, at most one notification every 50 ms',
       async () => {
    const { result, notes } = await withProgress(server, {
      code: 'import sys, time\nfor i in range(100):\n' +
            "    print('line', i, flush=True)\n" +
            "    if i % 10 == 0: print('warn', i, file=sys.stderr, flush=True)\n" +
            '    time.sleep(0.005)',
    });
    assert.equal(result.structuredContent.status, 'ok', textOf(result));
    assertIncreasing(notes);
    assert.ok(textOf(result).startsWith(notes.map(n => n.message).join('')),
              'the notifications together are the head of the output, in order');
    // While the code runs one at most every 50 ms, and one more with what was left just
    // before the result: counted against the run's own wall time, as the server measured it.
    const wall = result.structuredContent.usage.wall_ms;
    assert.ok(notes.length <= Math.floor(wall / 50) + 2,
              `${notes.length} notifications in a run of ${wall} ms: more than one every 50 ms`);
    assert.ok(notes.length < 100, `${notes.length} notifications for 110 flushes: not coalesced`);
  });

  test('a call without a progress token gets no notification', async () => {
    const result = await server.runPython({ code: "print('plain', flush=True)" });
    assert.equal(textOf(result), 'plain\n');
    // The SDK reports a notification for a token it did not send as an error.
    assertNoProgressAfterResult(server);
  });

  test('a session call reports progress too', async () => {
    const started = await server.call('start_session', {});
    const sessionId = started.structuredContent.session_id;
    const { result, notes } = await withProgress(server, {
      code: "print('in session', flush=True)\n40 + 2", session_id: sessionId,
    });
    assert.equal(result.structuredContent.value, '42');
    assert.ok('in session\n'.startsWith(notes.map(n => n.message).join('')));
    await server.call('end_session', { session_id: sessionId });
  });
});

describe('progress within the output limit', { timeout: 600_000 }, () => {
  let server;
  before(async () => {
    server = await McpServer.start(['-p', 'default', '--output-limit', '4KiB', '--pool', '1']);
  });
  after(async () => { await server?.close(); });

  test('never more text than the output limit, and the result as without', async () => {
    const { result, notes } = await withProgress(server, {
      code: "import time\nfor i in range(2000):\n    print('x' * 60, flush=True)\ntime.sleep(0.5)",
    });
    assert.equal(result.structuredContent.status, 'output_limit', textOf(result));
    const sent = notes.map(n => n.message).join('');
    assert.ok(Buffer.byteLength(sent) <= 4096,
              `${Buffer.byteLength(sent)} bytes of progress for a 4 KiB output limit`);
    assert.ok(sent.startsWith('x'.repeat(60) + '\n'));
    assert.ok(result.structuredContent.truncated.stdout);
  });

  test('bytes that are not text are named, not sent', async () => {
    const { notes } = await withProgress(server, {
      code: "import sys, time\nsys.stdout.buffer.write(b'\\xff\\xfe\\x00'); sys.stdout.flush()\n" +
            'time.sleep(0.5)',
    });
    const sent = notes.map(n => n.message).join('');
    assert.match(sent, /^\[3 bytes of stdout that are not text: the result has them\]\n$/);
  });
});
