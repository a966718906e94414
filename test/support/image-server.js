import http from 'node:http';

/**
 * A local HTTP server standing in for the remote sites images are proxied from. Routes:
 * /img/<name> a registered body; /status/<code>; /redirect/<n>/<name> n hops then the image;
 * /to?url=… one redirect anywhere; /slow/<ms>/<name> headers after ms; /trickle/<ms>/<name> headers at once,
 * then the body 1 KB every ms; /unsized/<name> the body without a Content-Length (chunked). It counts the
 * requests it received per path.
 */
export async function startImageServer() {
  /** @type {Map<string, { body: Buffer, type: string }>} */
  const files = new Map();
  /** @type {Map<string, number>} */
  const hits = new Map();
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url || '/', 'http://x');
    hits.set(url.pathname, (hits.get(url.pathname) || 0) + 1);
    const parts = url.pathname.split('/').filter(Boolean);
    const send = (/** @type {string} */ name) => {
      const file = files.get(name);
      if (!file) return res.writeHead(404).end('not found');
      return res.writeHead(200, { 'content-type': file.type, 'content-length': file.body.length }).end(file.body);
    };
    if (parts[0] === 'img') return send(parts[1]);
    if (parts[0] === 'status') return res.writeHead(Number(parts[1])).end('status');
    if (parts[0] === 'redirect') {
      const left = Number(parts[1]);
      const location = left > 0 ? `/redirect/${left - 1}/${parts[2]}` : `/img/${parts[2]}`;
      return res.writeHead(302, { location }).end();
    }
    if (parts[0] === 'to') return res.writeHead(302, { location: url.searchParams.get('url') || '/' }).end();
    if (parts[0] === 'trickle') {
      const file = files.get(parts[2]);
      if (!file) return res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-type': file.type, 'content-length': file.body.length });
      for (let at = 0; at < file.body.length && !res.destroyed; at += 1024) {
        res.write(file.body.subarray(at, at + 1024));
        await new Promise((resolve) => setTimeout(resolve, Number(parts[1])));
      }
      return res.end();
    }
    if (parts[0] === 'unsized') {
      const file = files.get(parts[1]);
      if (!file) return res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-type': file.type });
      return res.end(file.body);
    }
    if (parts[0] === 'slow') {
      await new Promise((resolve) => setTimeout(resolve, Number(parts[1])));
      return send(parts[2]);
    }
    return res.writeHead(404).end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    port,
    base: `http://127.0.0.1:${port}`,
    /** @param {string} name @param {Buffer} body @param {string} [type] */
    add(name, body, type = 'image/jpeg') {
      files.set(name, { body, type });
      return `http://127.0.0.1:${port}/img/${name}`;
    },
    /** @param {string} path */
    hits: (path) => hits.get(path) || 0,
    /** every request received */
    hitsTotal: () => [...hits.values()].reduce((sum, count) => sum + count, 0),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
