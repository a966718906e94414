// A held restart of the origin (lib/src/hold-socket.js: `./infra/stack restart` and `reload`): the next origin
// starts while the old one still answers the requests it took, and takes the result cache's directory (one
// process's at a time) and the metrics port over from it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { servicePid } from '@stack/lib/src/hold-socket.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { alive, startProcess } from '../../test/support/processes.js';
import { closeParts, originParts } from './harness.js';

const holder = fileURLToPath(new URL('../../lib/src/hold-socket.js', import.meta.url));
const originBin = fileURLToPath(new URL('../bin/origin', import.meta.url));

/**
 * A GET over a Unix socket: status, headers and body. @param {string} socket @param {string} url
 * @returns {Promise<{ status: number, headers: import('node:http').IncomingHttpHeaders, body: Buffer }>}
 */
function get(socket, url) {
  return new Promise((resolve, reject) => {
    const request = http.get({ socketPath: socket, path: url, agent: false, timeout: 30_000 }, (res) => {
      /** @type {Buffer[]} */
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    request.on('error', reject);
    request.on('timeout', () => request.destroy(new Error(`${url}: no answer in 30 s`)));
  });
}

test('a held restart: the next origin serves from the result cache the old one filled, while the old one still answers its slow request', async () => {
  const parts = await originParts({ LOG_LEVEL: 'info' }, os.tmpdir());
  const socket = path.join(parts.dataDir, 'origin.sock');
  const held = startProcess(process.execPath, [holder, socket, originBin], parts.settings);
  const holderPid = /** @type {number} */ (held.child.pid);
  const serving = async () => (await get(socket, '/healthz').catch(() => ({ status: 0 }))).status === 200;
  try {
    await waitFor(serving, 15_000, 'the origin on its held socket');
    const picture = (/** @type {string} */ background) =>
      sharp({ create: { width: 400, height: 300, channels: 3, background } })
        .jpeg()
        .toBuffer();
    const cached = `/p/${base58Url.encode(parts.site.add('a.jpg', await picture('#208040')))}?width=100`;
    parts.site.add('b.jpg', await picture('#402080'));
    // its original arrives after 3 s
    const slowUrl = `/p/${base58Url.encode(`${parts.site.base}/slow/3000/b.jpg`)}?width=100`;
    const first = await get(socket, cached);
    assert.equal(first.status, 200);
    const old = servicePid(holderPid);

    let answered = false;
    const slow = get(socket, slowUrl).finally(() => (answered = true));
    await waitFor(async () => parts.site.hits('/slow/3000/b.jpg') === 1, 5000, 'the old origin fetching');
    const restarted = Date.now();
    process.kill(holderPid, 'SIGHUP');
    await waitFor(
      async () => ![0, old].includes(servicePid(holderPid)) && (await serving()),
      10_000,
      'the next origin serving',
    );
    const metricsUrl = `http://127.0.0.1:${parts.metricsPort}/metrics`;
    await waitFor(
      async () => (await metricValue(metricsUrl, 'origin_result_cache_index_building').catch(() => 1)) === 0,
      10_000,
      "the next origin's result cache index",
    );
    const again = await get(socket, cached);
    assert.equal(again.headers['server-timing'], 'cache;desc=hit');
    assert.ok(again.body.equals(first.body));
    assert.ok(
      !answered,
      `the next origin served ${Date.now() - restarted} ms after the SIGHUP, not before the old one's last answer`,
    );
    assert.ok(alive(old), 'the old origin still answering');

    const late = await slow;
    assert.equal(late.status, 200, late.body.toString());
    await waitFor(async () => !alive(old), 15_000, 'the old origin gone');
    const next = servicePid(holderPid);
    assert.equal(JSON.parse(fs.readFileSync(path.join(parts.dataDir, 'variants', 'lock'), 'utf8')).pid, next);
    assert.equal((await get(socket, cached)).headers['server-timing'], 'cache;desc=hit');
  } catch (err) {
    throw new Error(`${/** @type {Error} */ (err).message}\n${held.output()}`, { cause: err });
  } finally {
    await held.stop();
    await closeParts(parts);
  }
});
