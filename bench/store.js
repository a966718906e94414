// bench/store: the upload store side by side, fs (DATA_DIR) and s3 (the stack's versitygw on this machine):
// uploads/s through the edge, and the latency of a cold original (an upload this origin has no copy of: fs
// reads its file, s3 GETs the object into the originals cache). Three runs each, min/median/max.
//   node bench/store.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { Pool } from 'undici';
import { freePort } from '../test/support/ports.js';
import { startStack } from '../test/support/stack.js';
import { machine, percentile, spread, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const UPLOADS = quick ? 40 : 150;
const RUNS = 3;
const CONCURRENCY = 8;

/** A distinct 1200×800 JPEG of about 400 KB (noise: every upload is new bytes). */
function photoLike() {
  return sharp({
    create: {
      width: 1200,
      height: 800,
      channels: 3,
      background: '#000000',
      noise: { type: 'gaussian', mean: 128, sigma: 25 },
    },
  })
    .jpeg({ quality: 85 })
    .toBuffer();
}

/**
 * `count` uploads through the edge, CONCURRENCY at a time: uploads/s and latencies.
 * @param {string} base @param {Buffer[]} bodies
 */
async function uploadAll(base, bodies) {
  const keys = [];
  const latencies = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++];
        const form = new FormData();
        form.append('image_file', new Blob([new Uint8Array(body)]), 'photo.jpg');
        const sent = performance.now();
        const response = await fetch(`${base}/upload`, {
          method: 'POST',
          headers: { authorization: 'Bearer bench' },
          body: form,
        });
        if (response.status !== 200) throw new Error(`upload answered ${response.status}: ${await response.text()}`);
        latencies.push(performance.now() - sent);
        keys.push(new URL((await response.json()).url).pathname.split('/')[1]);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { keys, rps: bodies.length / seconds, p99_ms: percentile(latencies, 0.99) };
}

/**
 * Every key read once straight from the origin after its restart with no cached copy (fs: the file in
 * DATA_DIR/uploads, s3: a GET from the bucket), CONCURRENCY at a time.
 * @param {Awaited<ReturnType<typeof startStack>>} stack @param {string[]} keys
 */
async function coldReads(stack, keys) {
  await stack.ctl('stop', 'origin');
  fs.rmSync(path.join(stack.dir, 'data', 'origin', 'originals'), { recursive: true, force: true });
  await stack.start('origin');
  const pool = new Pool(`http://127.0.0.1:${stack.env.ORIGIN_PORT}`, { connections: CONCURRENCY });
  const latencies = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < keys.length) {
        const key = keys[next++];
        const sent = performance.now();
        const response = await pool.request({ method: 'GET', path: `/${key}/photo.jpg` });
        await response.body.dump();
        if (response.statusCode !== 200) throw new Error(`original answered ${response.statusCode}`);
        latencies.push(performance.now() - sent);
      }
    }),
  );
  await pool.close();
  return { p50_ms: percentile(latencies, 0.5), p99_ms: percentile(latencies, 0.99) };
}

/** @param {'fs' | 's3'} store */
async function benchOne(store) {
  const settings = {
    STORE: store,
    // the origin measured on its port
    INTERNAL_SOCKETS: 'false',
    UPLOAD_TOKENS: 'bench',
    NGINX_RATE_LIMIT: '1000000',
    NGINX_RATE_BURST: '1000000',
    VARNISH_MISS_LIMIT: '0',
    LOG_LEVEL: 'warn',
  };
  const stack = await startStack(store === 's3' ? { ...settings, S3_PORT: String(await freePort()) } : settings);
  try {
    const runs = [];
    for (let run = 0; run < RUNS; run += 1) {
      const bodies = await Promise.all(Array.from({ length: UPLOADS }, photoLike));
      const uploaded = await uploadAll(stack.base, bodies);
      runs.push({ ...uploaded, cold: await coldReads(stack, uploaded.keys), keys: undefined });
    }
    return {
      store,
      uploadsPerSecond: spread(runs.map((run) => run.rps)),
      uploadP99: spread(runs.map((run) => run.p99_ms)),
      coldP50: spread(runs.map((run) => run.cold.p50_ms)),
      coldP99: spread(runs.map((run) => run.cold.p99_ms)),
    };
  } finally {
    await stack.stop();
  }
}

export async function benchStore() {
  const results = [await benchOne('fs'), await benchOne('s3')];
  /** @param {{ min: number, median: number, max: number }} value */
  const cell = (value) =>
    `${Math.round(value.median * 10) / 10} (${Math.round(value.min * 10) / 10}–${Math.round(value.max * 10) / 10})`;
  return {
    results,
    sections: [
      {
        heading: 'Upload store: fs and s3 side by side',
        text: `${UPLOADS} distinct 1200×800 JPEGs (about 400 KB each) uploaded through the edge ${CONCURRENCY} at a time (answered once stored: fsync + rename, or S3 acknowledged), then each read once straight from the origin after a restart with its originals cache emptied (cold: fs reads its file, s3 GETs the object from versitygw on the same machine). ${RUNS} runs; median (min–max).`,
        table: {
          columns: ['store', 'uploads/s', 'upload p99 ms', 'cold original p50 ms', 'cold original p99 ms'],
          rows: results.map((result) => [
            result.store,
            cell(result.uploadsPerSecond),
            cell(result.uploadP99),
            cell(result.coldP50),
            cell(result.coldP99),
          ]),
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchStore();
  const file = writeReport('store', {
    title: 'bench/store',
    command: `node bench/store.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
