// #51: any image host could crash the origin. A /p/ source answering HTTP/1.0, or `Connection: close`, with
// a body of a few MB made undici 7.30 throw `assert(!this.paused)` from its parser when the socket ended while
// the body was paused by backpressure; uncaught, the process exited. Here the hosts are the attack itself:
// raw sockets that answer so and close, bodies of several sizes, fifty requests; every answer is the image, and
// the one origin process served them all.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { decode } from '../../test/support/images.js';
import { startOrigin } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {net.Server[]} */
const hosts = [];

before(async () => {
  origin = await startOrigin();
});
after(async () => {
  for (const host of hosts) host.close();
  await origin?.stop();
});

/** A noisy PNG (noise does not compress): about `megapixels` × 3 MB. @param {number} width @param {number} height */
const noisyPng = (width, height) =>
  sharp({
    create: { width, height, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 50 } },
  })
    .png({ compressionLevel: 1 })
    .toBuffer();

/**
 * A host that answers every request with `head` and `body`, then closes the connection.
 * @param {string} head the status line and headers, without the blank line @param {Buffer} body
 */
async function closingHost(head, body) {
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () => {
      socket.write(`${head}\r\nContent-Type: image/png\r\n\r\n`);
      socket.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  hosts.push(server);
  return `http://127.0.0.1:${/** @type {net.AddressInfo} */ (server.address()).port}`;
}

test('hosts answering HTTP/1.0 or Connection: close with bodies of several sizes: fifty images, no crash', async () => {
  const pid = origin.pid();
  /** @type {string[]} */
  const urls = [];
  for (const [width, height] of [
    [300, 200],
    [900, 600],
    [1400, 1000],
  ]) {
    const body = await noisyPng(width, height);
    urls.push(
      await closingHost('HTTP/1.0 200 OK', body),
      await closingHost('HTTP/1.1 200 OK\r\nConnection: close', body),
      await closingHost(`HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: ${body.length}`, body),
    );
  }
  const statuses = [];
  // five at a time, each a new original (its own query), so every one is a fetch
  for (let round = 0; round < 10; round += 1) {
    const answers = await Promise.all(
      Array.from({ length: 5 }, async (_, i) => {
        const n = round * 5 + i;
        const response = await fetch(origin.proxied(`${urls[n % urls.length]}/photo.png?${n}`, { width: 64 + n }));
        const body = Buffer.from(await response.arrayBuffer());
        return { n, status: response.status, width: response.status === 200 ? (await decode(body)).width : 0 };
      }),
    );
    for (const { n, status, width } of answers) {
      statuses.push(status);
      assert.equal(status, 200, `request ${n}`);
      assert.equal(width, 64 + n, `request ${n}`);
    }
  }
  assert.equal(statuses.length, 50);
  assert.equal(origin.pid(), pid, 'the same origin process answered them all');
  assert.equal((await fetch(`${origin.base}/healthz`)).status, 200);
  assert.doesNotMatch(origin.output(), /AssertionError|uncaught/i);
});
