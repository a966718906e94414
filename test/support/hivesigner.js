import http from 'node:http';

/**
 * Stands in for Hivesigner's API (outside the stack, like the CDN): POST /api/me answers, for an access
 * token it was given with `grant`, the account and the scope the user granted; 401 for any other token.
 */
export async function startHivesigner() {
  /** @type {Map<string, { account: any, scope: string[] }>} */
  const grants = new Map();
  let calls = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls += 1;
      const grant = grants.get(String(req.headers.authorization || ''));
      if (req.method !== 'POST' || req.url !== '/api/me') return res.writeHead(404).end();
      if (!grant) return res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_grant"}');
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ user: grant.account.name, _id: grant.account.name, name: grant.account.name, ...grant }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    /**
     * An access token as Hivesigner issues it (base64url JSON), known to this server.
     * @param {any} account the account object /api/me answers @param {string} app @param {string[]} [scope]
     */
    grant(account, app, scope = ['login', 'vote', 'comment']) {
      const token = Buffer.from(
        JSON.stringify({
          signed_message: { type: 'posting', app },
          authors: [account.name],
          timestamp: Math.floor(Date.now() / 1000),
          signatures: ['1f'.padEnd(130, '0')],
        }),
      ).toString('base64url');
      grants.set(token, { account, scope });
      return token;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
