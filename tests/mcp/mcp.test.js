// `pysandbox mcp` as an MCP client sees it: the official TypeScript SDK's Client over a
// StdioClientTransport, asserting on what the SDK parsed (CallToolResultSchema, with
// structuredContent validated against each tool's outputSchema), and on the host's /proc for
// what must not survive. A second part speaks raw JSON-RPC to a child process, for what the SDK
// never sends: bad JSON, bad requests, other protocol versions.
//
//   npm ci --prefix tests/mcp
//   PYSANDBOX=$PWD/build/bin/pysandbox PYSANDBOX_AS=root node --test tests/mcp/mcp.test.js

import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  EMBED_CAP, LATEST_PROTOCOL_VERSION, McpServer, PNG_SIGNATURE, PROTOCOL_VERSIONS, REPO,
  RawServer, TIME_SLACK, blocksOf, descendants, isInvalidParams, poll, present,
  processesSeeing, sdk, textOf, within,
} from './support.js';

// How the server must turn down arguments it cannot run, by the protocol version in force.
// 2025-11-25 (server/tools, "Error Handling"; SEP-1303): input validation errors are tool
// execution errors -- a result with isError: true whose text tells the model what to fix -- so
// the model can correct itself; a JSON-RPC error would not reach it. Unknown tools and requests
// that do not fit CallToolRequest stay JSON-RPC errors (-32602). The versions before list
// "invalid arguments" among the protocol errors: -32602 (checked over raw JSON-RPC below, and in
// versions.test.js with older SDKs).
async function assertRejectedArguments(server, name, args, mentioned) {
  if (server.protocolVersion !== '2025-11-25') {
    await assert.rejects(server.call(name, args), isInvalidParams);
    return;
  }
  const result = await server.call(name, args);
  assert.equal(result.isError, true, `${name}(${JSON.stringify(args)}) was not refused: ` +
                                     JSON.stringify(result).slice(0, 1000));
  assert.ok(result.content.length > 0 && result.content[0].type === 'text',
            'a refused call must say why in a text block');
  assert.ok(result.content[0].text.includes(mentioned),
            `the refusal of ${JSON.stringify(args)} does not name ${JSON.stringify(mentioned)}: ` +
            JSON.stringify(result.content[0].text));
}

function assertOk(result) {
  assert.equal(result.structuredContent?.status, 'ok', JSON.stringify(result).slice(0, 2000));
  assert.equal(result.isError ?? false, false);
}

describe('pysandbox mcp through the official TypeScript SDK', { timeout: 600_000 }, () => {
  let server;
  before(async () => { server = await McpServer.start(); });
  after(async () => { await server?.close(); });

  test('initialize: the server names itself and agrees on the newest protocol version', () => {
    assert.equal(server.client.getServerVersion().name, 'pysandbox');
    // The SDK offers its newest version; a server that supports it answers with it.
    assert.equal(sdk.LATEST_PROTOCOL_VERSION, LATEST_PROTOCOL_VERSION,
                 'the pinned SDK offers a version this test does not know');
    assert.ok(PROTOCOL_VERSIONS.includes(server.protocolVersion), server.protocolVersion);
    assert.equal(server.protocolVersion, LATEST_PROTOCOL_VERSION);
    assert.ok(server.client.getServerCapabilities().tools, 'the server must declare tools');
  });

  test('tools/list: run_python, start_session and end_session, with input and output schemas',
       () => {
    assert.deepEqual(server.tools.map(tool => tool.name).sort(),
                     ['end_session', 'run_python', 'start_session']);
    for (const tool of server.tools) {
      assert.equal(tool.inputSchema.type, 'object', `${tool.name}.inputSchema`);
      assert.equal(tool.outputSchema?.type, 'object', `${tool.name}.outputSchema`);
      assert.ok(tool.description, `${tool.name} has no description for the model`);
    }
    const run = server.tool('run_python').inputSchema;
    assert.deepEqual(run.required, ['code']);
    for (const name of ['code', 'files', 'profile', 'session_id', 'timeout']) {
      assert.ok(name in run.properties, `run_python takes no ${name}`);
    }
    assert.deepEqual(server.tool('end_session').inputSchema.required, ['session_id']);
  });

  test("run_python's outputSchema is schema/pysandbox.result.v1.json, the one contract", () => {
    const file = path.join(REPO, 'schema', 'pysandbox.result.v1.json');
    assert.ok(fs.existsSync(file), `${file} is missing`);
    assert.deepEqual(server.tool('run_python').outputSchema,
                     JSON.parse(fs.readFileSync(file, 'utf8')));
  });

  test('ping', async () => {
    assert.deepEqual(await server.client.ping(), {});
  });

  test('print(1): the output as text, the result as structuredContent, no error', async () => {
    const result = await server.runPython({ code: 'print(1)' });
    assertOk(result);
    assert.deepEqual(result.content, [{ type: 'text', text: '1\n' }]);
    assert.equal(result.structuredContent.stdout, '1\n');
    assert.equal(result.structuredContent.profile, 'default', 'the first -p is the default');
  });

  test('an exception: isError, its type, and the traceback in the text', async () => {
    const result = await server.runPython({
      code: 'print("before")\ndef f():\n    raise ValueError("boom")\nf()\n' });
    const structured = result.structuredContent;
    assert.equal(result.isError, true);
    assert.equal(structured.status, 'exception');
    assert.equal(structured.exception.type, 'ValueError');
    assert.equal(structured.exception.message, 'boom');
    assert.equal(structured.exception.line, 3);
    const text = textOf(result);
    assert.ok(text.startsWith('before\n'), text);
    assert.ok(text.includes(structured.exception.traceback), text);
  });

  test('timeout: 1 stops a busy loop after a second, as a timeout', async () => {
    const start = performance.now();
    const result = await server.runPython({ code: 'while True:\n    pass\n', timeout: 1 });
    const elapsed = performance.now() - start;
    const structured = result.structuredContent;
    assert.equal(structured.status, 'timeout');
    assert.equal(result.isError, true);
    assert.equal(structured.limits.wall_time_ms, 1000);
    assert.ok(elapsed >= 1000 && elapsed < 1000 + 2000 * TIME_SLACK, `${elapsed} ms`);
    assert.ok(typeof structured.message === 'string' && structured.message.length > 0,
              'a timeout has a one-line sandbox message');
    assert.equal(textOf(result).trimEnd().split('\n').at(-1), structured.message);
  });

  test('timeout is capped by the profile: a client cannot ask for more', async () => {
    const result = await server.runPython({ code: 'import time\ntime.sleep(20)\n',
                                            timeout: 3600 });
    assert.equal(result.structuredContent.status, 'timeout');
    assert.equal(result.structuredContent.limits.wall_time_ms, 5000, 'default: 5 s');
  });

  test('a figure under datascience: one PNG image block', async () => {
    const result = await server.runPython({
      profile: 'datascience',
      code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("open")\n' });
    assertOk(result);
    assert.equal(result.structuredContent.profile, 'datascience');
    const images = blocksOf(result, 'image');
    assert.equal(images.length, 1, JSON.stringify(result.content.map(block => block.type)));
    assert.equal(images[0].mimeType, 'image/png');
    assert.ok(Buffer.from(images[0].data, 'base64').subarray(0, 8).equals(PNG_SIGNATURE));
    assert.deepEqual(result.structuredContent.figures,
                     [{ media_type: 'image/png', data: images[0].data }]);
    assert.equal(blocksOf(result, 'resource').length + blocksOf(result, 'resource_link').length,
                 0, 'a figure is an image, not also a file');
  });

  test('plt.show() and a figure left open: two images', async () => {
    const result = await server.runPython({
      profile: 'datascience',
      code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n' +
            'plt.figure()\nplt.bar([1, 2], [3, 4])\n' });
    assertOk(result);
    const images = blocksOf(result, 'image');
    assert.equal(images.length, 2);
    for (const image of images) {
      assert.equal(image.mimeType, 'image/png');
      assert.ok(Buffer.from(image.data, 'base64').subarray(0, 8).equals(PNG_SIGNATURE));
    }
    assert.notEqual(images[0].data, images[1].data);
  });

  test('a CSV passed in files is in /tmp/work for the code to read', async () => {
    const csv = 'name,amount\napples,3\npears,4\nplums,35\n';
    const result = await server.runPython({
      files: [{ name: 'data.csv', text: csv }],
      code: 'import csv, os\nrows = list(csv.DictReader(open("data.csv")))\n' +
            'print(os.getcwd(), len(rows), sum(int(r["amount"]) for r in rows))\n' });
    assertOk(result);
    assert.equal(result.structuredContent.stdout, '/tmp/work 3 42\n');
    assert.equal(blocksOf(result, 'resource').length, 0, 'an input is not a file the run made');
  });

  test('a binary file passed as base64 arrives byte for byte', async () => {
    const data = randomBytes(3000);
    const result = await server.runPython({
      files: [{ name: 'blob.bin', base64: data.toString('base64') }],
      code: 'import hashlib\nprint(hashlib.sha256(open("blob.bin", "rb").read()).hexdigest())\n' });
    assertOk(result);
    assert.equal(result.structuredContent.stdout,
                 createHash('sha256').update(data).digest('hex') + '\n');
  });

  test('files the code writes: embedded up to 64 KiB, a resource_link beyond', async () => {
    const result = await server.runPython({
      code: 'open("note.txt", "w").write("written in the sandbox\\n")\n' +
            'open("bytes.bin", "wb").write(bytes(range(256)))\n' +
            `open("at-cap.bin", "wb").write(b"a" * ${EMBED_CAP})\n` +
            `open("over-cap.bin", "wb").write(b"b" * ${EMBED_CAP + 1})\n` });
    assertOk(result);
    const embedded = Object.fromEntries(blocksOf(result, 'resource')
      .map(block => [block.resource.uri, block.resource]));
    assert.deepEqual(Object.keys(embedded).sort(), ['file:///tmp/work/at-cap.bin',
      'file:///tmp/work/bytes.bin', 'file:///tmp/work/note.txt']);
    assert.equal(embedded['file:///tmp/work/note.txt'].text, 'written in the sandbox\n');
    assert.deepEqual(Buffer.from(embedded['file:///tmp/work/bytes.bin'].blob, 'base64'),
                     Buffer.from([...Array(256).keys()]));
    const atCap = embedded['file:///tmp/work/at-cap.bin'];
    const atCapBytes = Buffer.from(atCap.blob ?? atCap.text, atCap.blob ? 'base64' : 'utf8');
    assert.equal(atCapBytes.length, EMBED_CAP);
    // Beyond the cap: a resource of the server's, and on stdio a file:// link to its host copy.
    const links = blocksOf(result, 'resource_link');
    assert.deepEqual(links.map(link => link.uri.split(':')[0]), ['pysandbox', 'file'],
                     JSON.stringify(links));
    for (const link of links) assert.ok(link.uri.endsWith('/over-cap.bin'), link.uri);
    const listed = (await server.client.listResources()).resources.map(r => r.uri);
    assert.ok(listed.includes(links[0].uri), JSON.stringify(listed));
    const read = await server.client.readResource({ uri: links[0].uri });
    assert.equal(read.contents.length, 1);
    assert.equal(read.contents[0].text, 'b'.repeat(EMBED_CAP + 1));
    await assert.rejects(server.client.readResource({ uri: 'pysandbox://files/0/nothing' }),
                         error => error.code === -32002);
  });

  test('one-shot runs share nothing: variables and files are gone', async () => {
    assertOk(await server.runPython({ code: 'y = 1\nopen("left.txt", "w").write("x")\n' }));
    const result = await server.runPython({
      code: 'import os\nprint(os.path.exists("left.txt"), "y" in globals())\n' });
    assert.equal(result.structuredContent.stdout, 'False False\n');
  });

  test('a session across three calls keeps variables and files, then ends', async () => {
    const started = await server.call('start_session', {});
    const sessionId = started.structuredContent.session_id;
    assert.equal(typeof sessionId, 'string');
    assert.ok(sessionId.length > 0);

    const first = await server.runPython({ session_id: sessionId,
                                           files: [{ name: 'n.txt', text: '41' }],
                                           code: 'x = int(open("n.txt").read())\n' });
    assertOk(first);
    assert.equal(first.structuredContent.value, null, 'an assignment has no value');
    assert.equal(first.structuredContent.state, 'kept');

    const second = await server.runPython({ session_id: sessionId,
                                            code: 'import os\nprint("n.txt" in os.listdir())\nx + 1\n' });
    assertOk(second);
    assert.equal(second.structuredContent.value, '42');
    assert.equal(second.structuredContent.stdout, 'True\n', 'the file stays for later calls');

    const ended = await server.call('end_session', { session_id: sessionId });
    assert.equal(ended.isError ?? false, false);
    assert.deepEqual(ended.structuredContent, { session_id: sessionId, ended: true });

    await assertRejectedArguments(server, 'run_python', { session_id: sessionId, code: 'x' },
                                  sessionId);
  });

  test('calls to one session are served in the order they were sent', async () => {
    const sessionId = (await server.call('start_session', {})).structuredContent.session_id;
    const calls = [
      server.runPython({ session_id: sessionId,
                         code: 'import time\ntime.sleep(0.5)\nitems = [1]\n' }),
      server.runPython({ session_id: sessionId, code: 'items.append(2)\n' }),
      server.runPython({ session_id: sessionId, code: 'items\n' }),
    ];
    const results = await Promise.all(calls);
    results.forEach(assertOk);
    assert.equal(results[2].structuredContent.value, '[1, 2]');
    await server.call('end_session', { session_id: sessionId });
  });

  test('four calls at once are all answered, and run concurrently', async t => {
    const sleep = 1.5;
    const start = performance.now();
    const results = await Promise.all([0, 1, 2, 3].map(i => server.runPython({
      code: `import time\ntime.sleep(${sleep})\nprint("call", ${i})\n` })));
    const elapsed = performance.now() - start;
    t.diagnostic(`4 calls of ${sleep} s each answered in ${elapsed | 0} ms`);
    results.forEach((result, i) => {
      assertOk(result);
      assert.equal(result.structuredContent.stdout, `call ${i}\n`);
    });
    if (os.availableParallelism() >= 2) {
      // One after the other they would take 4 x 1.5 s.
      assert.ok(elapsed < 4 * sleep * 1000 - 1000, `4 calls took ${elapsed | 0} ms`);
    }
  });

  test('cancelling a call kills its sandbox within 100 ms; the server goes on', async t => {
    // The code marks its sandbox with a file; the host finds the sandbox's processes as those
    // that see the file through /proc/PID/root.
    const marker = `cancel-${randomUUID()}`;
    const controller = new AbortController();
    const call = server.runPython(
      { profile: 'datascience', timeout: 30,
        code: `open(${JSON.stringify(marker)}, "w").close()\nwhile True:\n    pass\n` },
      { signal: controller.signal });
    const cancelled = assert.rejects(call);
    let sandbox = [];
    await poll(() => (sandbox = processesSeeing(`/tmp/work/${marker}`))
                       .some(process => process.exe.startsWith('python')),
               { timeoutMs: 30_000 * TIME_SLACK, intervalMs: 5 });
    assert.ok(sandbox.some(process => process.exe.startsWith('python')),
              `no sandboxed python created ${marker}: ${JSON.stringify(sandbox)}`);

    const start = performance.now();
    controller.abort();  // the SDK sends notifications/cancelled
    const killed = await poll(() => sandbox.every(process => !present(process, false)),
                              { timeoutMs: 5000 * TIME_SLACK, intervalMs: 1 });
    const elapsed = performance.now() - start;
    t.diagnostic(`sandbox processes ${JSON.stringify(sandbox)} dead ${elapsed.toFixed(1)} ms ` +
                 'after the abort');
    assert.ok(killed, `the cancelled run's processes survive: ${JSON.stringify(sandbox)}`);
    assert.ok(elapsed <= 100 * TIME_SLACK, `the cancelled run died after ${elapsed | 0} ms`);
    assert.ok(await poll(() => sandbox.every(process => !present(process)),
                         { timeoutMs: 5000 * TIME_SLACK }),
              'the cancelled run\'s processes were never reaped');
    await cancelled;

    const next = await server.runPython({ code: 'print("after")' });
    assert.equal(next.structuredContent.stdout, 'after\n');
    await server.client.ping();
    // A response to the cancelled request would reach the SDK as one for an unknown id.
    assert.deepEqual(server.errors.map(String), []);
  });

  test('cancelling a session cell stops it as a cell timeout would: the state survives',
       async () => {
    const sessionId = (await server.call('start_session', {})).structuredContent.session_id;
    assertOk(await server.runPython({ session_id: sessionId, code: 'x = 1\n' }));
    const marker = `cell-${randomUUID()}`;
    const controller = new AbortController();
    const cell = server.runPython(
      { session_id: sessionId,
        code: `open(${JSON.stringify(marker)}, "w").close()\nwhile True:\n    pass\n` },
      { signal: controller.signal });
    const cancelled = assert.rejects(cell);
    assert.ok(await poll(() => processesSeeing(`/tmp/work/${marker}`).length > 0,
                         { timeoutMs: 30_000 * TIME_SLACK, intervalMs: 5 }),
              'the cell never created its marker');
    controller.abort();
    await cancelled;
    const after = await server.runPython({ session_id: sessionId, code: 'x\n' },
                                         { timeout: 30_000 * TIME_SLACK });
    assertOk(after);
    assert.equal(after.structuredContent.value, '1');
    await server.call('end_session', { session_id: sessionId });
    assert.deepEqual(server.errors.map(String), []);
  });

  test('bad arguments are refused with a reason the model can read', async () => {
    await assertRejectedArguments(server, 'run_python', {}, 'code');
    await assertRejectedArguments(server, 'run_python', { code: 42 }, 'code');
    await assertRejectedArguments(server, 'run_python', { code: 'pass', timeout: 'soon' },
                                  'timeout');
    await assertRejectedArguments(server, 'run_python', { code: 'pass', session_id: 'no-such' },
                                  'no-such');
    // Offered: default and datascience. network exists, and would let the code out.
    await assertRejectedArguments(server, 'run_python', { code: 'pass', profile: 'network' },
                                  'network');
    for (const name of ['../x', 'a/b', '.', '..', '']) {
      await assertRejectedArguments(server, 'run_python',
                                    { code: 'pass', files: [{ name, text: 'x' }] },
                                    JSON.stringify(name).slice(1, -1) || 'name');
    }
    await assertRejectedArguments(server, 'end_session', { session_id: 'no-such' }, 'no-such');
    await assertRejectedArguments(server, 'start_session', { profile: 'network' }, 'network');
    // None of them ran anything; the server still answers.
    assertOk(await server.runPython({ code: 'pass' }));
  });

  test('an unknown tool is a JSON-RPC error -32602 (server/tools, "Error Handling")',
       async () => {
    await assert.rejects(server.call('run_shell', { command: 'id' }), isInvalidParams);
    assertOk(await server.runPython({ code: 'pass' }));
  });

  test("a run printing 12 MB: the answer fits the SDK's 10 MiB stdio message limit", async () => {
    // StdioClientTransport drops any message over STDIO_DEFAULT_MAX_BUFFER_SIZE (10 MiB) and
    // closes the connection; the default profile lets a run print 16 MiB.
    const bytes = 12_000_000;
    const result = await server.runPython({
      code: `import sys\nfor _ in range(${bytes / 100}):\n    sys.stdout.write("z" * 99 + "\\n")\n` });
    assert.equal(result.structuredContent.bytes.stdout, bytes);
    assert.ok(textOf(result).startsWith('z'.repeat(99) + '\n'));
    assert.deepEqual(await server.client.ping(), {});
  });

  test('the SDK saw no protocol error in all of this', () => {
    assert.deepEqual(server.errors.map(String), []);
  });
});

describe('closing stdin ends the server and everything it started', { timeout: 120_000 },
         () => {
  test('a live session and a warm pool, then stdin closes: nothing is left', async () => {
    const server = await McpServer.start();
    try {
      const sessionId = (await server.call('start_session', {})).structuredContent.session_id;
      assertOk(await server.runPython({ session_id: sessionId, code: 'x = 1\n' }));
      const started = descendants(server.pid);
      assert.ok(started.length > 0, 'the session\'s sandbox is not below the server');
      await server.close();
      const gone = await poll(() => started.every(process => !present(process)),
                              { timeoutMs: 5000 * TIME_SLACK, intervalMs: 10 });
      assert.ok(gone, `left behind: ${JSON.stringify(started.filter(p => present(p)))}`);
    } finally {
      await server.close().catch(() => {});
    }
  });
});

describe('a server that cannot plan its profiles still starts and tells the client why',
         { timeout: 120_000 }, () => {
  test('a misspelt -p: initialize and tools/list answer; every call is a tool error naming it',
       async () => {
    const server = await McpServer.start(['-p', 'defualt', '-p', 'datascience', '--pool', '1']);
    try {
      assert.equal(server.protocolVersion, LATEST_PROTOCOL_VERSION);
      assert.deepEqual(server.tools.map(tool => tool.name).sort(),
                       ['end_session', 'run_python', 'start_session']);
      assert.deepEqual(server.tool('run_python').inputSchema.properties.profile.enum,
                       ['defualt', 'datascience'], 'the profiles as the command line names them');
      for (const [name, args] of [['run_python', { code: 'print(1)' }], ['start_session', {}],
                                  ['end_session', { session_id: 'x' }], ['run_shell', {}]]) {
        const result = await server.call(name, args);
        assert.equal(result.isError, true, `${name}: ${JSON.stringify(result)}`);
        const text = textOf(result);
        assert.ok(text.includes('profile error: profile "defualt" not found'), text);
        assert.ok(text.includes('did you mean "default"?'), text);
        assert.ok(text.includes("Fix the server's command line"), text);
      }
      // As today, stderr says it too; no sandbox was ever started.
      assert.match(server.stderr.text,
                   /^pysandbox: profile error: profile "defualt" not found .*did you mean "default"\?$/m);
      assert.deepEqual(descendants(server.pid), []);
      assert.deepEqual(server.errors.map(String), []);
    } finally {
      // The exit status a bad profile has always had, once the client goes.
      await server.close({ code: 125 });
    }
  });

  test('a bad flag still stops it before it serves anything: exit 125', async () => {
    const raw = new RawServer(['--no-such-flag']);
    raw.child.stdin.on('error', () => {});  // it may be gone before its stdin is written
    const closed = new Promise(resolve => raw.child.once('close', () => resolve(true)));
    assert.ok(await within(closed, 10_000 * TIME_SLACK), 'it did not exit by itself');
    assert.deepEqual(raw.exited, { code: 125, signal: null });
    assert.deepEqual(raw.lines, []);
    assert.match(raw.stderr.text, /--no-such-flag/);
  });
});

describe('raw JSON-RPC over stdio', { timeout: 300_000 }, () => {
  test('initialize: the client\'s version when supported, else the newest', async () => {
    const asked = [...PROTOCOL_VERSIONS.map(version => [version, version]),
                   ['2099-01-01', LATEST_PROTOCOL_VERSION], ['2024-10-07', LATEST_PROTOCOL_VERSION]];
    for (const [version, expected] of asked) {
      await RawServer.with(async raw => {
        const result = await raw.initialize(version);
        assert.equal(result.protocolVersion, expected, `asked for ${version}`);
        assert.equal(result.serverInfo.name, 'pysandbox');
        assert.ok(result.capabilities.tools);
      });
    }
  });

  test('parse error, invalid request, unknown method: standard codes, and it goes on serving',
       async () => {
    await RawServer.with(async raw => {
      await raw.initialize('2025-06-18');
      let id = 0;
      const stillServing = async () => {
        const reply = await raw.request({ id: `ping-${++id}`, method: 'ping' });
        assert.deepEqual(reply.result, {}, JSON.stringify(reply));
        assert.deepEqual(raw.messages, [], 'unexpected extra messages');
      };
      const expectError = async (text, code, ids) => {
        raw.send(text);
        const reply = await raw.next(message => 'error' in message || 'result' in message);
        assert.equal(reply.jsonrpc, '2.0');
        assert.equal(reply.error?.code, code, `${text} -> ${JSON.stringify(reply)}`);
        assert.equal(typeof reply.error.message, 'string');
        assert.ok(ids.includes(reply.id), `${text} -> id ${JSON.stringify(reply.id)}`);
        await stillServing();
      };
      await expectError('{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, [null]);
      await expectError('{"jsonrpc": "2.0", "id": 2, "method": "ping"} trailing', -32700, [null]);
      await expectError(Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), -32700, [null]);  // not UTF-8
      await expectError('{"jsonrpc": "2.0", "id": 3}', -32600, [3, null]);
      await expectError('{"jsonrpc": "1.0", "id": 4, "method": "ping"}', -32600, [4, null]);
      await expectError('{"jsonrpc": "2.0", "id": 5, "method": 7}', -32600, [5, null]);
      await expectError('"a string"', -32600, [null]);
      await expectError('{"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}', -32601, [6]);
      // A notification is never answered, even an unknown one.
      raw.send('{"jsonrpc": "2.0", "method": "notifications/no_such_thing"}');
      await stillServing();
      const call = params => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call',
                                              params });
      await expectError(call({ name: 'no_such_tool', arguments: {} }), -32602, [7]);
      await expectError(call({ name: 'run_python', arguments: 'print(1)' }), -32602, [7]);
      await expectError(call({ arguments: { code: 'print(1)' } }), -32602, [7]);
      // 2025-06-18 counts invalid arguments among the protocol errors.
      await expectError(call({ name: 'run_python', arguments: {} }), -32602, [7]);
      await expectError(call({ name: 'run_python', arguments: { code: 1 } }), -32602, [7]);
      const ok = await raw.request({ id: 8, method: 'tools/call',
                                     params: { name: 'run_python',
                                               arguments: { code: 'print(8)' } } });
      assert.equal(ok.result?.structuredContent?.stdout, '8\n', JSON.stringify(ok));
      assert.deepEqual(raw.lines.filter(line => { try { JSON.parse(line); return false; }
                                                  catch { return true; } }), [],
                       'everything on stdout is JSON-RPC');
    });
  });

  // JSON-RPC batches: a MUST of 2025-03-26 (and of JSON-RPC 2.0, which 2024-11-05 follows),
  // removed by 2025-06-18. One line in, one array out once every request of it is answered.
  const message = (id, method, params = {}) => ({ jsonrpc: '2.0', id, method, params });
  const runPython = (id, code) => message(id, 'tools/call',
                                          { name: 'run_python', arguments: { code } });
  const isArray = reply => Array.isArray(reply);

  test('a batch under 2025-03-26 and 2024-11-05: one array of the answers, calls concurrent',
       async t => {
    for (const version of ['2025-03-26', '2024-11-05']) {
      await RawServer.with(async raw => {
        await raw.initialize(version);
        const sleep = 1.5;
        const start = performance.now();
        raw.send(JSON.stringify([
          message('p', 'ping'),
          runPython(1, `import time\ntime.sleep(${sleep})\nprint("one")`),
          { jsonrpc: '2.0', method: 'notifications/no_such_thing' },
          runPython('two', `import time\ntime.sleep(${sleep})\nprint("two")`),
          message(3, 'tools/list'),
        ]));
        const replies = await raw.next(isArray, 60_000 * TIME_SLACK);
        const elapsed = performance.now() - start;
        t.diagnostic(`${version}: a batch of 2 calls of ${sleep} s answered in ${elapsed | 0} ms`);
        assert.deepEqual(replies.map(reply => reply.id).sort(), [1, 3, 'p', 'two'].sort(),
                         JSON.stringify(replies));
        const byId = new Map(replies.map(reply => [reply.id, reply]));
        assert.deepEqual(byId.get('p').result, {});
        assert.equal(byId.get(3).result.tools.length, 3);
        assert.match(byId.get(1).result.content[0].text, /^one\n/);
        assert.match(byId.get('two').result.content[0].text, /^two\n/);
        if (os.availableParallelism() >= 2)
          assert.ok(elapsed < 2 * sleep * 1000 - 500, `the batch's 2 calls took ${elapsed | 0} ms`);
        assert.deepEqual(raw.messages, [], 'more than the one array came');
      });
    }
  });

  test('batches: refused whole where wrong, element by element where JSON-RPC says so',
       async () => {
    await RawServer.with(async raw => {
      // Before initialize no version is agreed: the newest, which has no batches.
      raw.send(JSON.stringify([message('early', 'ping')]));
      const early = await raw.next(reply => 'error' in reply);
      assert.equal(early.error.code, -32600);
      assert.equal(early.id, null);
      await raw.initialize('2025-03-26');
      const stillServing = async () => {
        const reply = await raw.request(message('alive', 'ping'));
        assert.deepEqual(reply.result, {}, JSON.stringify(reply));
        assert.deepEqual(raw.messages, [], 'unexpected extra messages');
      };
      // JSON-RPC 2.0: an empty array is one Invalid Request, not an array.
      raw.send('[]');
      const empty = await raw.next(reply => 'error' in reply);
      assert.deepEqual([empty.id, empty.error.code], [null, -32600]);
      assert.match(empty.error.message, /empty batch/);
      await stillServing();
      // Over the bound (8, --http-max-client-requests): refused whole, none of it served.
      raw.send(JSON.stringify(Array.from({ length: 9 }, (_, i) =>
        message(`big-${i}`, 'tools/call', { name: 'start_session', arguments: {} }))));
      const big = await raw.next(reply => 'error' in reply);
      assert.deepEqual([big.id, big.error.code], [null, -32600]);
      assert.match(big.error.message, /at most 8/);
      await stillServing();
      // Each element is judged on its own: a bad one gets its error in the array.
      raw.send(JSON.stringify([1, message('ok', 'ping'), { jsonrpc: '1.0', id: 'old', method: 'ping' },
                               message('init', 'initialize', {
                                 protocolVersion: '2025-03-26', capabilities: {},
                                 clientInfo: { name: 'x', version: '1' } })]));
      const mixed = await raw.next(isArray);
      const codes = new Map(mixed.map(reply => [JSON.stringify(reply.id), reply.error?.code]));
      assert.equal(mixed.length, 4, JSON.stringify(mixed));
      assert.equal(codes.get('null'), -32600, JSON.stringify(mixed));
      assert.equal(codes.get('"ok"'), undefined, JSON.stringify(mixed));
      assert.equal(codes.get('"old"'), -32600, JSON.stringify(mixed));
      assert.equal(codes.get('"init"'), -32600, JSON.stringify(mixed));
      // Notifications only: nothing at all comes back.
      raw.send(JSON.stringify([{ jsonrpc: '2.0', method: 'notifications/initialized' }]));
      await stillServing();
      // A call of the batch cancelled: the array comes without it. An id still in flight is
      // not taken again (a cancellation could not tell the two apart).
      raw.send(JSON.stringify([runPython('slow', 'import time\ntime.sleep(60)'),
                               message('quick', 'ping'), message('slow', 'ping')]));
      raw.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled',
                                params: { requestId: 'slow' } }));
      const rest = await raw.next(isArray);
      assert.equal(rest.length, 2, JSON.stringify(rest));
      assert.deepEqual(rest.find(reply => reply.id === 'quick'),
                       { jsonrpc: '2.0', id: 'quick', result: {} });
      assert.equal(rest.find(reply => reply.id === 'slow')?.error?.code, -32600,
                   JSON.stringify(rest));
      await stillServing();
      // No session came of the refused batch of start_session.
      const session = await raw.request(message('s', 'tools/call',
                                                { name: 'start_session', arguments: {} }));
      assert.ok(session.result, JSON.stringify(session));
    });
    await RawServer.with(async raw => {
      await raw.initialize('2025-06-18');
      raw.send(JSON.stringify([message('p', 'ping')]));
      const refused = await raw.next(reply => 'error' in reply);
      assert.deepEqual([refused.id, refused.error.code], [null, -32600]);
      assert.match(refused.error.message, /not part of MCP 2025-06-18/);
      const reply = await raw.request(message('after', 'ping'));
      assert.deepEqual(reply.result, {});
      assert.deepEqual(raw.messages, [], 'the refused batch was served');
    });
  });
});
