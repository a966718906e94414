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
