import net from 'node:net';

/** @param {number} port @returns {Promise<boolean>} */
function canListen(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

const taken = new Set();

/**
 * A free TCP port on loopback, below Linux's ephemeral range (32768+): a port the kernel handed out
 * could be handed out again as the local port of some outgoing connection before our server binds it.
 * @returns {Promise<number>}
 */
export async function freePort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (taken.has(port)) continue;
    taken.add(port);
    if (await canListen(port)) return port;
  }
}

/** Waits until `check` resolves truthy, polling. @param {() => Promise<unknown>} check @param {number} [ms] @param {string} [what] */
export async function waitFor(check, ms = 10_000, what = 'condition') {
  const deadline = Date.now() + ms;
  let lastError;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${/** @type {Error} */ (lastError).message}` : ''}`);
}
