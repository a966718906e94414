import http from 'node:http';

/**
 * A local server speaking the Hive API's JSON-RPC wire format: `condenser_api.get_accounts` (params:
 * [[names]]) answers account objects. It records every call it received, so tests assert on upstream load.
 * @param {{ delayMs?: number }} [options]
 */
export async function startHiveNode(options = {}) {
  /** @type {Map<string, any>} */
  const accounts = new Map();
  /** @type {Array<{ method: string, params: any }>} */
  const calls = [];
  let down = false;
  /** @type {Record<string, (params: any) => any>} */
  const methods = {
    'condenser_api.get_accounts': ([names]) =>
      names.map((/** @type {string} */ name) => accounts.get(name)).filter(Boolean),
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', async () => {
      if (down) return res.writeHead(503).end('down');
      const request = JSON.parse(body);
      calls.push({ method: request.method, params: request.params });
      if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      const handler = methods[request.method];
      const reply = handler
        ? { jsonrpc: '2.0', result: handler(request.params), id: request.id }
        : { jsonrpc: '2.0', error: { code: -32601, message: 'method not found' }, id: request.id };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    methods,
    /** @param {any} account an account object as condenser_api returns it */
    setAccount: (account) => accounts.set(account.name, account),
    /**
     * Serves a chain from block `head` on (condenser_api.get_dynamic_global_properties, get_ops_in_block) for
     * the chain follower: `publish` adds a block of `comment` ops (posts and edits) at the next height, or at
     * `at` (a block before the follower's start, for a backfill).
     * @param {number} head
     */
    chain(head) {
      /** @type {Map<number, any[]>} */
      const blocks = new Map();
      methods['condenser_api.get_dynamic_global_properties'] = () => ({ head_block_number: head });
      methods['condenser_api.get_ops_in_block'] = ([block]) => blocks.get(block) || [];
      return {
        /** @param {Array<Record<string, unknown>>} comments @param {number} [at] */
        publish(comments, at) {
          if (at === undefined) head += 1;
          blocks.set(
            at ?? head,
            comments.map((body) => ({
              op: ['comment', { parent_author: '', parent_permlink: 'hive', title: 't', ...body }],
            })),
          );
        },
      };
    },
    /** @param {boolean} value */
    setDown: (value) => {
      down = value;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
