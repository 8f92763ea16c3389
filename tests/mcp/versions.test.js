// `pysandbox mcp` as clients of each protocol version see it: the official TypeScript SDK at a
// release whose newest version is 2024-11-05 (1.9.0), one at 2025-03-26 (1.11.5), and today's
// (2025-11-25), each making the same calls. What each version must and must not contain is judged
// on the messages as the server sent them (support.js records them before the SDK parses them),
// from each version's schema.ts (modelcontextprotocol/schema/VERSION):
//   2024-11-05  text, image and embedded resource content; no tool annotations, no titles, no
//               outputSchema/structuredContent, no resource_link; bad arguments are -32602
//   2025-03-26  + tool annotations (where a tool's title goes)
//   2025-06-18  + Tool.title and Implementation.title, outputSchema/structuredContent,
//               resource_link
//   2025-11-25  + bad arguments are a tool error the model reads (SEP-1303)
//
//   PYSANDBOX=$PWD/build/bin/pysandbox PYSANDBOX_AS=root node --test tests/mcp/versions.test.js

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { EMBED_CAP, McpServer, OLD_SDKS, PNG_SIGNATURE, sdk } from './support.js';

// What each version defines, as the tests read the specification.
const VERSIONS = {
  '2024-11-05': { client: OLD_SDKS['2024-11-05'], sdkRelease: '1.9.0', annotations: false,
                  titles: false, structured: false, resourceLinks: false,
                  argumentErrorsAsResults: false },
  '2025-03-26': { client: OLD_SDKS['2025-03-26'], sdkRelease: '1.11.5', annotations: true,
                  titles: false, structured: false, resourceLinks: false,
                  argumentErrorsAsResults: false },
  '2025-11-25': { client: sdk, sdkRelease: '1.32.2', annotations: true, titles: true,
                  structured: true, resourceLinks: true, argumentErrorsAsResults: true },
};

// Every key anywhere in a message, with its path.
function keysOf(value, path = '') {
  if (Array.isArray(value)) return value.flatMap((item, i) => keysOf(item, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, item]) => [`${path}.${key}`,
                                                         ...keysOf(item, `${path}.${key}`)]);
}

for (const [version, expected] of Object.entries(VERSIONS)) {
  describe(`a ${version} client (the TypeScript SDK ${expected.sdkRelease})`,
           { timeout: 300_000 }, () => {
    let server;
    before(async () => { server = await McpServer.start(undefined, { client: expected.client }); });
    after(async () => { await server?.close(); });

    test('the SDK offers this version, and the server answers with it', () => {
      assert.equal(expected.client.LATEST_PROTOCOL_VERSION, version,
                   'package.json pins an SDK release of another protocol version');
      assert.equal(server.protocolVersion, version);
      const info = server.initializeResult.serverInfo;
      assert.equal(info.name, 'pysandbox');
      assert.equal('title' in info, expected.titles, JSON.stringify(info));
      assert.ok(server.initializeResult.capabilities.tools);
    });

    test('tools/list: titles, annotations and output schemas only where the version has them',
         () => {
      const response = server.received.find(message => message.result?.tools);
      assert.ok(response, 'no tools/list response recorded');
      const tools = response.result.tools;
      assert.deepEqual(tools.map(tool => tool.name), ['run_python', 'start_session',
                                                      'end_session']);
      for (const tool of tools) {
        assert.equal(tool.inputSchema.type, 'object');
        assert.ok(tool.description);
        assert.equal('title' in tool, expected.titles, `${tool.name}.title`);
        assert.equal('outputSchema' in tool, expected.structured, `${tool.name}.outputSchema`);
        // The annotations only carry the title, where Tool.title is not there to hold it.
        const annotated = expected.annotations && !expected.titles;
        assert.equal('annotations' in tool, annotated, `${tool.name}.annotations`);
        if (annotated) assert.equal(typeof tool.annotations.title, 'string');
      }
    });

    test('run_python: text and a figure as an image', async () => {
      const { result, raw } = await server.rawCall('run_python', {
        profile: 'datascience',
        code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint("drawn")\n' });
      assert.equal(result.isError, false);
      assert.deepEqual(raw.result.content.map(block => block.type), ['text', 'image']);
      assert.equal(raw.result.content[0].text, 'drawn\n');
      const image = raw.result.content[1];
      assert.equal(image.mimeType, 'image/png');
      assert.ok(Buffer.from(image.data, 'base64').subarray(0, 8).equals(PNG_SIGNATURE));
      assert.equal('structuredContent' in raw.result, expected.structured);
      if (expected.structured) assert.equal(raw.result.structuredContent.stdout, 'drawn\n');
    });

    test('files: small ones embedded; a big one linked, or named in text with its size',
         async () => {
      const { result, raw } = await server.rawCall('run_python', {
        code: 'open("small.txt", "w").write("hi")\n' +
              `open("big.bin", "wb").write(b"b" * ${EMBED_CAP + 1})\n` });
      assert.equal(result.isError, false);
      const content = raw.result.content;
      const embedded = content.filter(block => block.type === 'resource');
      assert.deepEqual(embedded.map(block => [block.resource.uri, block.resource.text]),
                       [['file:///tmp/work/small.txt', 'hi']]);
      const links = content.filter(block => block.type === 'resource_link');
      if (expected.resourceLinks) {
        // The server's own resource, and on stdio a file:// link to its host copy as well.
        assert.deepEqual(links.map(link => link.uri.split(':')[0]), ['pysandbox', 'file']);
        for (const link of links) {
          assert.ok(link.uri.endsWith('/big.bin'), link.uri);
          assert.equal(link.size, EMBED_CAP + 1);
        }
        return;
      }
      assert.deepEqual(links, []);
      const notes = content.slice(1).filter(block => block.type === 'text');
      assert.equal(notes.length, 1, JSON.stringify(content));
      const note = notes[0].text;
      assert.ok(note.includes('/tmp/work/big.bin') && note.includes(`${EMBED_CAP + 1} bytes`),
                note);
      // The server's copy it names is the file.
      const copy = /the server's copy: (\/\S+)$/.exec(note)?.[1];
      assert.ok(copy, note);
      assert.equal(fs.statSync(copy).size, EMBED_CAP + 1);
      // And the resource it names reads back as the file.
      const uri = /read it as resource (pysandbox:\S+);/.exec(note)?.[1];
      assert.ok(uri, note);
      const read = await server.client.readResource({ uri });
      assert.equal(read.contents[0].text, 'b'.repeat(EMBED_CAP + 1));
    });

    test('a session: started, used, ended', async () => {
      const started = await server.rawCall('start_session', {});
      const text = started.raw.result.content[0].text;
      const sessionId = /^session_id: (\S+)$/.exec(text)?.[1];
      assert.ok(sessionId, text);
      assert.equal('structuredContent' in started.raw.result, expected.structured);
      if (expected.structured) {
        assert.deepEqual(started.raw.result.structuredContent, { session_id: sessionId });
      }
      await server.call('run_python', { session_id: sessionId, code: 'x = 41\n' });
      const { raw } = await server.rawCall('run_python', { session_id: sessionId, code: 'x + 1' });
      assert.equal(raw.result.content[0].text, '42\n');
      const ended = await server.rawCall('end_session', { session_id: sessionId });
      assert.equal(ended.raw.result.content[0].text, `session ${sessionId} ended`);
      assert.equal('structuredContent' in ended.raw.result, expected.structured);
    });

    test('errors: an exception is a tool error; bad arguments as the version says', async () => {
      const raised = await server.rawCall('run_python', { code: 'raise ValueError("boom")' });
      assert.equal(raised.raw.result.isError, true);
      assert.ok(raised.raw.result.content[0].text.includes('ValueError: boom'),
                raised.raw.result.content[0].text);

      const refused = await server.rawCall('run_python', { code: 42 });
      if (expected.argumentErrorsAsResults) {
        assert.equal(refused.raw.result?.isError, true, JSON.stringify(refused.raw));
        assert.ok(refused.raw.result.content[0].text.includes('code'));
      } else {
        assert.equal(refused.raw.error?.code, -32602, JSON.stringify(refused.raw));
        assert.ok(refused.raw.error.message.includes('code'), refused.raw.error.message);
        assert.equal(refused.error?.code, -32602, 'the SDK reports it as InvalidParams');
      }
      const unknown = await server.rawCall('run_shell', {});
      assert.equal(unknown.raw.error?.code, -32602, JSON.stringify(unknown.raw));
    });

    test('nothing the version does not define, in any message; the SDK saw no error', () => {
      const keys = server.received.flatMap(message => keysOf(message));
      const absent = [];
      if (!expected.structured) absent.push(/\.structuredContent$/, /\.outputSchema$/);
      if (!expected.annotations) absent.push(/\.annotations$/);
      for (const pattern of absent) {
        assert.deepEqual(keys.filter(key => pattern.test(key)), [], String(pattern));
      }
      const blockTypes = server.received.flatMap(message => message.result?.content ?? [])
        .map(block => block.type);
      const allowed = ['text', 'image', 'resource',
                       ...(expected.resourceLinks ? ['resource_link'] : [])];
      assert.deepEqual(blockTypes.filter(type => !allowed.includes(type)), []);
      assert.deepEqual(server.errors.map(String), []);
    });
  });
}
