import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHiveClient } from '../src/hive-rpc.js';
import { startHiveNode } from '../../test/support/hive-node.js';
import { freePort } from '../../test/support/ports.js';

test('a dead Hive node fails over to the next, which is then tried first', async () => {
  const node = await startHiveNode();
  node.setAccount({ name: 'alice', json_metadata: '', posting_json_metadata: '' });
  const dead = `http://127.0.0.1:${await freePort()}`;
  const client = createHiveClient({ urls: [dead, node.url], timeoutMs: 1000 });
  try {
    const [first] = await client.call('condenser_api.get_accounts', [['alice']]);
    assert.equal(first.name, 'alice');
    await client.call('condenser_api.get_accounts', [['alice']]);
    assert.equal(node.calls.length, 2);
    // a JSON-RPC error is the node's answer: the same on every node, so not retried elsewhere
    await assert.rejects(client.call('condenser_api.no_such_method', []), /method not found/);
  } finally {
    await node.close();
  }
});

test('every node down rejects with the last error', async () => {
  const client = createHiveClient({
    urls: [`http://127.0.0.1:${await freePort()}`, `http://127.0.0.1:${await freePort()}`],
    timeoutMs: 500,
  });
  await assert.rejects(client.call('condenser_api.get_accounts', [['alice']]));
});

test('a node that answers without end fails the call at 32 MB, and the next node answers', async () => {
  const http = await import('node:http');
  // a stand-in for a broken or hostile Hive API node: an endless JSON string
  const endless = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"jsonrpc":"2.0","id":1,"result":"');
    const chunk = Buffer.alloc(1 << 20, 97);
    const more = () => {
      while (!res.destroyed && res.write(chunk));
      if (!res.destroyed) res.once('drain', more);
    };
    more();
  });
  await new Promise((resolve) => endless.listen(0, '127.0.0.1', () => resolve(null)));
  const node = await startHiveNode();
  node.setAccount({ name: 'alice', json_metadata: '', posting_json_metadata: '' });
  const { port } = /** @type {import('node:net').AddressInfo} */ (endless.address());
  const client = createHiveClient({ urls: [`http://127.0.0.1:${port}`, node.url], timeoutMs: 30_000 });
  const before = process.memoryUsage().rss;
  try {
    const [first] = await client.call('condenser_api.get_accounts', [['alice']]);
    assert.equal(first.name, 'alice');
    assert.ok(process.memoryUsage().rss - before < 200 * 2 ** 20, 'no more than the bound held');
  } finally {
    endless.closeAllConnections();
    endless.close();
    await node.close();
  }
});
