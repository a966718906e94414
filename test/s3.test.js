// needs the whole-stack tier's built tools (versitygw, helm, kube-score, Podman): run once they are built
// Uploads in a real S3 server (the stack's versitygw) shared by two origins with their own disks behind
// haproxy: any origin serves any upload, a variant is made once across the fleet, nothing acknowledged is
// lost when an origin is SIGKILLed, S3 down is a clean 503 and its return needs no restart, a bucket the
// origin cannot use stops it at start, and migrate-store copies an fs store into the bucket.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { readEnvFile } from '../infra/resolve.js';
import { keyOf } from '../origin/src/keys.js';
import { photo, withMetadata } from './support/images.js';
import pino from 'pino';
import { loadConfig } from '@stack/lib';
import { DiskLru } from '../origin/src/cache/disk-lru.js';
import { settings as originSettings } from '../origin/src/config.js';
import { FsStore } from '../origin/src/store/fs.js';
import { S3Store } from '../origin/src/store/s3.js';
import { checkStoreContract } from '../origin/test/store-contract.js';
import { metricValue } from './support/metrics.js';
import { freePort, waitFor } from './support/ports.js';
import { startProcess, startService } from './support/processes.js';
import { startStack } from './support/stack.js';
import { tokenUpload } from './support/upload.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {Awaited<ReturnType<typeof startService>>} */
let second;
/** the stack's origin and the second one, each on its own port, data directory and metrics port */
const origins = { first: { port: '', metrics: '' }, second: { port: '', metrics: '' } };
/** @type {Record<string, string>} */
let secondEnv;
/** how long an origin waits on S3 (the default is 10 s): a hung S3 below costs each answer this long */
const s3TimeoutMs = 4000;

before(async () => {
  origins.first = { port: String(await freePort()), metrics: String(await freePort()) };
  origins.second = { port: String(await freePort()), metrics: String(await freePort()) };
  stack = await startStack({
    STORE: 's3',
    S3_PORT: String(await freePort()),
    UPLOAD_TOKENS: 's3-token',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    // four uploads at once from one client below: nginx frees a connection's slot a moment after its
    // answer, so at the default of 4 the next upload of a worker could meet the limit (a 429 seen once)
    NGINX_UPLOADS_PER_CLIENT: '8',
    VARNISH_MISS_LIMIT: '0',
    S3_TIMEOUT_MS: String(s3TimeoutMs),
    ORIGIN_PORT: origins.first.port,
    ORIGIN_METRICS_PORT: origins.first.metrics,
    ORIGIN_SERVERS: `127.0.0.1:${origins.first.port},127.0.0.1:${origins.second.port}`,
  });
  secondEnv = {
    // the stack's settings and its origin's own secrets (its S3 keys, its Redis user)
    ...readEnvFile(path.join(stack.dir, 'env')),
    ...readEnvFile(path.join(stack.dir, 'secrets', 'origin.env')),
    ORIGIN_PORT: origins.second.port,
    ORIGIN_METRICS_PORT: origins.second.metrics,
    DATA_DIR: path.join(stack.dir, 'data', 'origin-2'),
  };
  second = await startService('origin/bin/origin', secondEnv, Number(origins.second.port));
  // haproxy sees both origins up
  await waitFor(
    async () => (await haproxyServers()).filter((row) => row.status === 'UP').length === 2,
    30_000,
    'both origins UP in haproxy',
  );
});
after(async () => {
  await second?.stop();
  await stack?.stop();
});

/** be_images' servers as haproxy's stats give them. */
async function haproxyServers() {
  return (await stack.haproxyStats())
    .filter((row) => row.pxname === 'be_images' && !['BACKEND', 'FRONTEND'].includes(row.svname))
    .map((row) => ({ name: row.svname, status: row.status }));
}

/** A distinct photograph-sized image (noise compresses badly: about a megabyte as PNG). @param {number} width */
function noise(width = 600) {
  return sharp({
    create: {
      width,
      height: 400,
      channels: 3,
      background: '#000000',
      noise: { type: 'gaussian', mean: 128, sigma: 40 },
    },
  })
    .png()
    .toBuffer();
}

/**
 * Uploads through a base URL (the edge or one origin).
 * @param {string} base @param {Buffer} body @param {AbortSignal} [signal] @returns {Promise<Response>}
 */
const postUpload = (base, body, signal) => tokenUpload(base, body, 'photo.png', 's3-token', signal);

/** @param {string} base @param {Buffer} body @returns {Promise<string>} the key */
async function upload(base, body) {
  const response = await postUpload(base, body);
  assert.equal(response.status, 200, await response.clone().text());
  const { url } = /** @type {{ url: string }} */ (await response.json());
  return new URL(url).pathname.split('/')[1];
}

const originBase = (/** @type {'first' | 'second'} */ which) => `http://127.0.0.1:${origins[which].port}`;
/** @param {string} url */
const bytesOf = async (url) => {
  const response = await fetch(url);
  return { status: response.status, body: Buffer.from(await response.arrayBuffer()), response };
};
/** The object of a key in the embedded versitygw's bucket (a file per object). @param {string} key */
const objectFile = (key) => path.join(stack.dir, 'data', 's3', 'uploads', key);

test('an upload through one origin is served byte for byte by the other and through the edge', async () => {
  for (const [from, to] of /** @type {const} */ ([
    ['first', 'second'],
    ['second', 'first'],
  ])) {
    const body = await noise();
    const key = await upload(originBase(from), body);
    assert.equal(key, keyOf(body));
    assert.ok(fs.existsSync(objectFile(key)), 'the object is in the bucket once the upload is answered');
    const direct = await bytesOf(`${originBase(to)}/${key}/photo.png`);
    assert.equal(direct.status, 200);
    assert.ok(direct.body.equals(body), `served by the ${to} origin byte for byte`);
    const edge = await bytesOf(`${stack.base}/${key}/photo.png`);
    assert.equal(edge.status, 200);
    assert.ok(edge.body.equals(body), 'served through the edge byte for byte');
  }
});

test("a scrubbed upload (a phone's photograph, its location taken out) is served from the bucket by the origin that did not store it", async () => {
  const body = withMetadata(await sharp(photo('Kite', '1920x1080')).resize(400).jpeg().toBuffer(), 'jpg');
  const key = await upload(originBase('first'), body);
  assert.equal(key, keyOf(body), "the key is Hive's, over the bytes sent");
  const stored = fs.readFileSync(objectFile(key));
  assert.ok(!stored.equals(body), 'what is stored is scrubbed');
  // the second origin never saw it: it reads the object, checked against the record stored with it (#50's
  // cluster stage found every such upload a 502 store_corrupt there)
  const served = await bytesOf(`${originBase('second')}/${key}/photo.jpg`);
  assert.equal(served.status, 200);
  assert.ok(served.body.equals(stored), 'the stored bytes');
});

test('the same bytes uploaded twice are written once', async () => {
  const body = await noise();
  const before = await metricValue(
    `http://127.0.0.1:${origins.first.metrics}/metrics`,
    'origin_store_operations_total',
    { operation: 'put', result: 'exists' },
  );
  assert.equal(await upload(originBase('first'), body), await upload(originBase('first'), body));
  const afterValue = await metricValue(
    `http://127.0.0.1:${origins.first.metrics}/metrics`,
    'origin_store_operations_total',
    { operation: 'put', result: 'exists' },
  );
  assert.equal(afterValue - before, 1);
});

test("the S3 store keeps the Store contract against the stack's versitygw: put, stat, record, remove", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 's3-contract-'));
  try {
    const config = /** @type {any} */ (loadConfig(originSettings, { ...secondEnv, DATA_DIR: dir }));
    const cache = new DiskLru(path.join(dir, 'originals'), 64 * 1024 * 1024);
    await cache.init();
    const store = new S3Store({ config, cache, logger: pino({ level: 'silent' }) });
    await store.init();
    await checkStoreContract(store);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a variant asked 20 times across the fleet is made once: every size of an image goes to one origin', async () => {
  const key = await upload(stack.base, await noise());
  const transforms = async () => {
    let sum = 0;
    for (const which of /** @type {const} */ (['first', 'second']))
      sum += await metricValue(`http://127.0.0.1:${origins[which].metrics}/metrics`, 'origin_transforms_total');
    return sum;
  };
  const before = await transforms();
  // straight to haproxy (no varnish in between to absorb the repeats), 10 at once then 10 one by one
  const url = `/p/${base58Url.encode(`${stack.base}/${key}/photo.png`)}?width=240&format=webp`;
  const statuses = await Promise.all(
    Array.from({ length: 10 }, async () => (await stack.direct('images', url)).status),
  );
  for (let i = 0; i < 10; i += 1) statuses.push((await stack.direct('images', url)).status);
  assert.deepEqual(new Set(statuses), new Set([200]));
  assert.equal((await transforms()) - before, 1, 'one transform for 20 requests');
  // another size of the same image lands on the same origin: the other one never read the original
  const [firstReads, secondReads] = await Promise.all(
    ['first', 'second'].map((which) =>
      metricValue(
        `http://127.0.0.1:${origins[/** @type {'first'|'second'} */ (which)].metrics}/metrics`,
        'origin_store_operations_total',
        { operation: 'get', result: 'ok' },
      ),
    ),
  );
  const other = url.replace('width=240', 'width=120');
  assert.equal((await stack.direct('images', other)).status, 200);
  const [firstAfter, secondAfter] = await Promise.all(
    ['first', 'second'].map((which) =>
      metricValue(
        `http://127.0.0.1:${origins[/** @type {'first'|'second'} */ (which)].metrics}/metrics`,
        'origin_store_operations_total',
        { operation: 'get', result: 'ok' },
      ),
    ),
  );
  assert.equal(firstAfter - firstReads + secondAfter - secondReads, 0, 'the second size read no original again');
});

test('an origin SIGKILLed in the middle of uploads: every acknowledged upload is in the bucket and served by the other origin', async () => {
  const bodies = await Promise.all(Array.from({ length: 24 }, () => noise(900)));
  /** @type {Array<{ body: Buffer, status: number, key?: string }>} */
  const results = [];
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) {
      const body = bodies[next++];
      const response = await postUpload(stack.base, body).catch(() => null);
      const status = response?.status || 0;
      const key =
        status === 200 ? new URL(/** @type {any} */ (await response?.json()).url).pathname.split('/')[1] : undefined;
      if (status !== 200) await response?.arrayBuffer();
      results.push({ body, status, key });
    }
  };
  const running = Promise.all([worker(), worker(), worker(), worker()]);
  await waitFor(async () => results.length >= 3, 30_000, 'uploads under way');
  await stack.killService('origin');
  await running;
  const acknowledged = results.filter((result) => result.status === 200);
  assert.ok(acknowledged.length >= 3, `acknowledged uploads: ${acknowledged.length}`);
  for (const { body, key } of acknowledged) {
    assert.equal(key, keyOf(body));
    assert.ok(
      fs.readFileSync(objectFile(/** @type {string} */ (key))).equals(body),
      'the object holds the bytes acknowledged',
    );
    const served = await bytesOf(`${originBase('second')}/${key}/photo.png`);
    assert.equal(served.status, 200);
    assert.ok(served.body.equals(body));
  }
  for (const { status } of results.filter((result) => result.status !== 200))
    assert.ok([0, 502, 503].includes(status), `failed upload: ${status}`);
  // supervisord restarts it
  await waitFor(async () => (await fetch(`${originBase('first')}/healthz`)).ok, 30_000, 'the killed origin back');
  await stack.settled();
});

test('S3 stopped: cached uploads 200, uncached and uploads a JSON 503; S3 back: all served without restarting the origins', async () => {
  const cachedKey = await upload(originBase('second'), await noise()); // the second origin keeps a copy on its disk
  const uncachedKey = await upload(originBase('first'), await noise()); // the second origin never read this one
  const pids = [await stack.servicePid('origin'), second.child.pid];
  await stack.ctl('stop', 'versitygw');
  try {
    assert.equal((await bytesOf(`${originBase('second')}/${cachedKey}/a.png`)).status, 200);
    const uncached = await bytesOf(`${originBase('second')}/${uncachedKey}/a.png`);
    assert.equal(uncached.status, 503);
    assert.equal(uncached.response.headers.get('retry-after'), '5');
    assert.equal(JSON.parse(uncached.body.toString()).error.name, 'store_unavailable');
    const variant = await bytesOf(
      `${originBase('second')}/p/${base58Url.encode(`${stack.base}/${uncachedKey}/a.png`)}?width=100`,
    );
    assert.equal(variant.status, 503);
    const refused = await postUpload(stack.base, await noise());
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).error.name, 'store_unavailable');
  } finally {
    await stack.ctl('start', 'versitygw');
  }
  await waitFor(
    async () => (await fetch(`${originBase('second')}/${uncachedKey}/a.png`)).status === 200,
    20_000,
    'the uncached upload served once S3 is back',
  );
  assert.equal((await postUpload(stack.base, await noise())).status, 200);
  assert.deepEqual([await stack.servicePid('origin'), second.child.pid], pids, 'no origin restarted');
});

test('S3 hung (SIGSTOP: its connections open, nothing answered): an uncached upload and an upload are a JSON 503 within S3_TIMEOUT_MS, not a wait for ever; once it runs again all is served', async () => {
  const uncachedKey = await upload(originBase('first'), await noise()); // the second origin never read this one
  const body = await noise();
  const pid = await stack.pid('versitygw');
  assert.ok(pid > 0, 'versitygw runs'); // (0 would stop this process's whole group)
  process.kill(pid, 'SIGSTOP');
  /** @type {Array<{ status: number, name: string, timing: string | null, ms: number }>} */
  let answers = [];
  try {
    const started = Date.now();
    /** @param {Promise<Response>} pending */
    const answered = async (pending) => {
      const response = await pending;
      const text = await response.text();
      const type = response.headers.get('content-type') ?? '';
      // what answered, where it is not the JSON error (seen once: a 200 image, 373 ms into the test)
      return {
        status: response.status,
        name: type.includes('json') ? JSON.parse(text).error?.name : `(${type}, ${text.length} bytes)`,
        timing: response.headers.get('server-timing'),
        ms: Date.now() - started,
      };
    };
    // a bound of its own, so the old behaviour (waiting for ever) fails here instead of at the file's timeout
    const signal = AbortSignal.timeout(30_000);
    answers = await Promise.all([
      answered(fetch(`${originBase('second')}/${uncachedKey}/a.png`, { signal })),
      answered(postUpload(originBase('second'), body, signal)),
    ]);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  const whoAnswered = () =>
    `${JSON.stringify(answers)}; the second origin ${second.child.exitCode === null ? 'runs' : `exited ${second.child.exitCode}`}, pid ${second.child.pid}, versitygw pid ${pid}; its output:\n${second.output()}`;
  for (const answer of answers) {
    assert.equal(answer.status, 503, whoAnswered());
    assert.equal(answer.name, 'store_unavailable');
    // the deadline, plus a generous allowance for a busy machine
    assert.ok(answer.ms < s3TimeoutMs + 10_000, `answered after ${answer.ms} ms`);
  }
  await waitFor(
    async () => (await fetch(`${originBase('second')}/${uncachedKey}/a.png`)).status === 200,
    20_000,
    'the uncached upload served once S3 runs again',
  );
  assert.equal((await postUpload(originBase('second'), body)).status, 200);
});

test('wrong S3 credentials or a missing bucket: the origin refuses to start with one clear log line', async () => {
  /** @type {Array<[string, string, RegExp]>} */
  const cases = [
    ['S3_SECRET_ACCESS_KEY', 'wrong-secret', /access to bucket "uploads" at .* denied: check S3_ACCESS_KEY_ID/],
    ['S3_BUCKET', 'no-such-bucket', /bucket "no-such-bucket" at .* does not exist/],
  ];
  for (const [setting, value, expected] of cases) {
    const proc = startProcess('origin/bin/origin', [], {
      ...secondEnv,
      LOG_LEVEL: 'warn',
      ORIGIN_PORT: String(await freePort()),
      ORIGIN_METRICS_PORT: String(await freePort()),
      DATA_DIR: fs.mkdtempSync(path.join(stack.dir, 'data', 'refused-')),
      [setting]: value,
    });
    const code = await Promise.race([
      proc.exited,
      new Promise((resolve) => setTimeout(() => resolve('still running'), 20_000)),
    ]);
    if (code === 'still running') await proc.kill();
    assert.equal(code, 1, proc.output());
    const lines = proc.output().trim().split('\n');
    assert.equal(lines.length, 1, proc.output());
    assert.match(JSON.parse(lines[0]).msg, expected);
  }
});

test('migrate-store copies an fs store into the bucket (verified, idempotent), then every old upload is served from S3', async () => {
  const old = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-store-'));
  const store = new FsStore(old);
  await store.init();
  const bodies = await Promise.all([noise(200), noise(300), noise(400)]);
  for (const body of bodies) {
    const temp = store.tempPath();
    fs.writeFileSync(temp, body);
    await store.put(keyOf(body), temp);
  }
  // a damaged file: its bytes do not make its key
  const damaged = keyOf(Buffer.from('other bytes'));
  fs.mkdirSync(path.dirname(store.pathFor(damaged)), { recursive: true });
  fs.writeFileSync(store.pathFor(damaged), bodies[0]);
  try {
    const migrate = () => stack.stack(['migrate-store', '--from', old]).catch((/** @type {any} */ err) => err);
    const first = await migrate();
    assert.equal(first.code, 1, 'a damaged file makes the run fail');
    assert.deepEqual(JSON.parse(first.stdout), { total: 4, copied: 3, present: 0, damaged: 1, failed: 0 });
    assert.match(first.stderr, /\[#{30}\] 4\/4/);
    assert.match(first.stderr, new RegExp(`${damaged}: its bytes do not make its key`));
    fs.rmSync(store.pathFor(damaged));
    const again = await migrate();
    assert.equal(again.code ?? 0, 0, again.stderr);
    assert.deepEqual(JSON.parse(again.stdout), { total: 3, copied: 0, present: 3, damaged: 0, failed: 0 });
    assert.ok(!fs.existsSync(objectFile(damaged)));
    for (const body of bodies) {
      const served = await bytesOf(`${stack.base}/${keyOf(body)}/old.png`);
      assert.equal(served.status, 200);
      assert.ok(served.body.equals(body));
    }
  } finally {
    fs.rmSync(old, { recursive: true, force: true });
  }
});
