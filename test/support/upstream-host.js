import http from 'node:http';

/**
 * A local image host of the images.hive.blog kind (/<key>/<name>) standing in for an upstream this stack
 * takes over from, in one of three ways: `honest` serves the uploads it holds, `liar` answers every key
 * with the same wrong bytes, `hang` sends nothing (until closed). It counts the requests it received per key.
 * @param {'honest' | 'liar' | 'hang'} mode @param {string} [host] the loopback address it listens on
 */
export async function startUpstreamHost(mode, host = '127.0.0.1') {
  /** @type {Map<string, Buffer>} */
  const uploads = new Map();
  /** @type {Map<string, number>} */
  const hits = new Map();
  /** @type {Set<http.ServerResponse>} */
  const hanging = new Set();
  /** @type {Buffer} */
  let wrong = Buffer.from('not the image of any key');
  const server = http.createServer((req, res) => {
    const key = new URL(req.url || '/', 'http://x').pathname.split('/')[1] || '';
    hits.set(key, (hits.get(key) || 0) + 1);
    if (mode === 'hang') {
      hanging.add(res);
      return;
    }
    const body = mode === 'liar' ? wrong : uploads.get(key);
    if (!body) return res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    return res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': body.length }).end(body);
  });
  await new Promise((resolve) => server.listen(0, host, () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    base: `http://${host}:${port}`,
    /** @param {string} key @param {Buffer} body */
    hold: (key, body) => uploads.set(key, body),
    /** What a liar answers for every key. @param {Buffer} body */
    lie: (body) => {
      wrong = body;
    },
    /** Requests for `key` so far, or for every key. @param {string} [key] */
    hits: (key) => (key === undefined ? [...hits.values()].reduce((sum, n) => sum + n, 0) : hits.get(key) || 0),
    close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}
