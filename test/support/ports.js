import net from 'node:net';

/** A free TCP port on loopback. @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
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
