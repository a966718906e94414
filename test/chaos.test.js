// Faults and overload against a real stack, bounded in time: origin SIGKILLed mid-load, Redis killed,
// varnish restarted (coalescing), and 10× the transform capacity. The 60 s overload is bench/overload.js.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { base58Url } from '@stack/lib';
import { sign } from '../purge-service/src/signature.js';
import { runOverload } from '../bench/overload.js';
import { solid } from './support/images.js';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';
import { tokenUpload } from './support/upload.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;

before(async () => {
  // the per-client limit is lifted: here one test process stands for many clients
  stack = await startStack({
    UPLOAD_TOKENS: 'chaos',
    PURGE_HMAC_KEYS: 'chaos-key',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    VARNISH_MISS_LIMIT: '0',
  });
});
after(() => stack?.stop());

/** @param {Buffer} body @param {string} name */
async function upload(body, name) {
  const response = await tokenUpload(stack.base, body, name, 'chaos');
  assert.equal(response.status, 200, await response.clone().text());
  return /** @type {{ url: string }} */ (await response.json()).url;
}

const originMetrics = () => `http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`;
const variant = (/** @type {string} */ url, /** @type {string} */ query) =>
  `${stack.base}/p/${base58Url.encode(url)}?${query}`;

/** @param {string} url */
async function get(url, /** @type {RequestInit} */ init = {}) {
  const started = performance.now();
  const response = await fetch(url, init);
  const body = await response.arrayBuffer();
  return { status: response.status, ms: performance.now() - started, response, body };
}

/** How many times haproxy has marked the origin down (its stats' chkdown). */
async function originMarkedDown() {
  const row = (await stack.haproxyStats()).find(
    (fields) => fields.pxname === 'be_images' && fields.svname === 'origin1',
  );
  assert.ok(row, "haproxy's stats have be_images/origin1");
  return Number(row.chkdown);
}

/**
 * When the origin answers /healthz on its own socket again (performance.now()): asked from now on, past
 * haproxy. A request waits in the held socket's backlog until a new process takes it, so the first answer
 * comes as it listens; one the dying process took is reset, and asked again.
 */
async function answersAgain() {
  await waitFor(
    async () => {
      const response = await stack.direct('origin', '/healthz');
      await response.arrayBuffer();
      return response.status === 200;
    },
    30_000,
    'the origin answering on its socket after the kill',
  );
  return performance.now();
}

test('origin SIGKILLed mid-load (a crash, the OOM killer): cached and uncached images are all served; the misses of the gap wait for the next origin process on its held socket (one slower to start than the checks allow: clean 503s until it listens)', async () => {
  const cached = await upload(await solid(120, 80, 'jpeg'), 'cached.jpg');
  assert.equal((await get(cached)).status, 200);
  const source = await upload(await solid(900, 600, 'jpeg'), 'source.jpg');
  let stop = false;
  const cachedStatuses = [];
  const uncachedStatuses = [];
  let width = 100;
  const cachedLoop = (async () => {
    while (!stop) cachedStatuses.push((await get(cached)).status);
  })();
  const uncachedLoop = (async () => {
    while (!stop) {
      const at = performance.now();
      const result = await get(variant(source, `width=${width++}`));
      uncachedStatuses.push({ at, done: performance.now(), ...result });
    }
  })();
  // Prometheus has scraped the origin as it runs now (the alert ServiceRestarting counts its starts)
  await waitFor(
    async () => (await stack.prometheus('process_start_time_seconds{job="origin"}')).length === 1,
    20_000,
    'Prometheus scraping the origin',
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  const holder = await stack.pid('origin');
  const killedPid = await stack.servicePid('origin');
  const downsBefore = await originMarkedDown();
  const killedAt = performance.now();
  /** @type {any} */
  let recovered;
  /** @type {Promise<number>} */
  let listening = Promise.resolve(0);
  try {
    process.kill(killedPid, 'SIGKILL');
    listening = answersAgain();
    listening.catch(() => {}); // awaited below; a recovery that timed out first must not leave it unhandled
    await waitFor(
      async () => {
        recovered = uncachedStatuses.find((entry) => entry.at > killedAt + 50 && entry.status === 200);
        return recovered && ![0, killedPid].includes(await stack.servicePid('origin'));
      },
      30_000,
      'recovery',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
  } finally {
    stop = true;
    await Promise.all([cachedLoop, uncachedLoop]);
  }
  assert.ok(
    cachedStatuses.length > 50 && cachedStatuses.every((status) => status === 200),
    `cached: ${[...new Set(cachedStatuses)]}`,
  );
  assert.ok(
    uncachedStatuses.some((entry) => entry.at > killedAt),
    'requests were made across the kill',
  );
  const failed = uncachedStatuses.filter((entry) => entry.status !== 200);
  const listenedMs = (await listening) - killedAt;
  const markedDown = (await originMarkedDown()) > downsBefore;
  const seconds = (/** @type {number} */ at) => ((at - killedAt) / 1000).toFixed(1);
  const failures = () =>
    `${failed.length} misses failed, sent ${seconds(failed[0].at)} to ${seconds(failed.at(-1).at)} s after the kill ` +
    `(the new process listening ${(listenedMs / 1000).toFixed(1)} s after it; haproxy marked the origin down: ` +
    `${markedDown}): ${[...new Set(failed.map((entry) => `${entry.status} ${Buffer.from(entry.body).toString()}`))].join('; ')}`;
  if (!markedDown) {
    if (failed.length) assert.fail(`${failures()}\n\n${await stack.diagnosis(['origin.log', 'haproxy.log'])}`);
  } else {
    // A new process slower to listen than haproxy's checks allow a hung one (two 2 s checks: a CPU starved
    // by other programs) is marked down as a hung one is: the misses waiting then are a clean 503 (or the
    // edge's, once varnish's probes too called it sick), and those sent once the new process listened and
    // haproxy's next check (250 ms) and varnish's next probe (2 s) passed are served again.
    assert.ok(listenedMs > 2000, `marked down, yet listening ${listenedMs} ms after the kill`);
    for (const entry of failed) {
      assert.equal(entry.status, 503, failures());
      assert.equal(JSON.parse(Buffer.from(entry.body).toString()).error.name, 'service_unavailable');
      assert.ok(entry.response.headers.get('retry-after'), 'a 503 says when to retry');
    }
    const late = failed.filter((entry) => entry.at - killedAt > listenedMs + 3000);
    assert.deepEqual(late.length, 0, `misses failed after the new process listened: ${failures()}`);
  }
  // the holder started it again, not supervisord; Prometheus sees the new start (ServiceRestarting counts them)
  assert.equal(await stack.pid('origin'), holder);
  await waitFor(
    async () =>
      Number((await stack.prometheus('changes(process_start_time_seconds{job="origin"}[15m])'))[0]?.value[1]) >= 1,
    20_000,
    "Prometheus seeing the origin's new start",
  );
  const recoveryMs = recovered.done - killedAt;
  // how soon the new process listens is the machine's (0.6 s here quiet, 7 s beside 15 busy loops); once it
  // does, new variants are made again at once
  assert.ok(
    recoveryMs - listenedMs < 5000,
    `the first new variant served ${recoveryMs} ms after the kill, ${listenedMs} ms after the new process listened`,
  );
  const waited = Math.max(...uncachedStatuses.filter((entry) => entry.at > killedAt - 200).map((entry) => entry.ms));
  process.stdout.write(
    `# origin SIGKILL: ${uncachedStatuses.length} misses, ${failed.length} of them 503s (the longest wait ${(waited / 1000).toFixed(1)} s), the new process listening ${(listenedMs / 1000).toFixed(1)} s after the kill${markedDown ? ' (marked down meanwhile)' : ''}, the first new variant served ${(recoveryMs / 1000).toFixed(1)} s after it, ${cachedStatuses.length} cached answers all 200\n`,
  );
  await stack.settled();
});

test('origin stopped (SIGSTOP, a hung process): a miss and an upload waiting on it end in a clean 503 once haproxy marks it down, not at its 60 s timeout', async () => {
  const cached = await upload(await solid(100, 70, 'jpeg'), 'stopped-cached.jpg');
  assert.equal((await get(cached)).status, 200);
  const source = await upload(await solid(800, 500, 'jpeg'), 'stopped-source.jpg');
  const pid = await stack.servicePid('origin');
  process.kill(pid, 'SIGSTOP');
  /** @type {Awaited<ReturnType<typeof get>>} */
  let waiting;
  /** @type {Awaited<ReturnType<typeof get>>} */
  let uploading;
  let cachedMeanwhile = 0;
  try {
    // its health checks fail from now: marked down after two of them (2 s apart, 2 s each)
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(await solid(90, 60, 'jpeg'))]), 'stopped-upload.jpg');
    const init = { method: 'POST', headers: { authorization: 'Bearer chaos' }, body: form };
    [waiting, uploading] = await Promise.all([
      get(variant(source, 'width=321'), { signal: AbortSignal.timeout(90_000) }),
      get(`${stack.base}/upload`, { ...init, signal: AbortSignal.timeout(90_000) }),
    ]);
    cachedMeanwhile = (await get(cached)).status;
  } finally {
    process.kill(pid, 'SIGCONT');
    // (the stack healthy again whatever happened above: the tests after this one need it)
    await waitFor(async () => (await get(variant(source, 'width=322'))).status === 200, 30_000, 'misses served again');
  }
  assert.equal(waiting.status, 503, Buffer.from(waiting.body).toString());
  assert.equal(JSON.parse(Buffer.from(waiting.body).toString()).error.name, 'service_unavailable');
  assert.ok(waiting.ms < 30_000, `the miss waited ${waiting.ms} ms (haproxy's server timeout: 60 s)`);
  assert.equal(uploading.status, 503, Buffer.from(uploading.body).toString());
  assert.ok(uploading.ms < 30_000, `the upload waited ${uploading.ms} ms (haproxy's server timeout: 60 s)`);
  assert.equal(cachedMeanwhile, 200, 'a cached image is served meanwhile');
  process.stdout.write(
    `# origin SIGSTOP: the waiting miss answered 503 after ${(waiting.ms / 1000).toFixed(1)} s, the upload after ${(uploading.ms / 1000).toFixed(1)} s\n`,
  );
  await stack.settled();
});

test('Redis killed: images keep serving, avatars degrade, webhooks answer 503, and nothing acknowledged is lost', async () => {
  const image = await upload(await solid(70, 70, 'png'), 'redis.png');
  await get(image);
  const { Redis } = await import('ioredis');
  const redis = new Redis(stack.redisUrl, { maxRetriesPerRequest: null });
  redis.on('error', () => {});
  try {
    await redisOutage(image, redis);
  } finally {
    redis.disconnect(); // a client left connecting would keep this file's process alive after a failure
  }
});

/** @param {string} image @param {import('ioredis').Redis} redis */
async function redisOutage(image, redis) {
  const accounts = Array.from({ length: 20 }, (_, i) => `kept-${i}`);
  const location = async (/** @type {string} */ account) =>
    (await fetch(`${stack.base}/u/${account}/avatar`, { redirect: 'manual' })).headers.get('location');
  for (const account of accounts)
    await redis.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-old.png`);
  const old = await Promise.all(accounts.map(location));
  for (const account of accounts)
    await redis.hset(`avatar:local:${account}`, 'avatar', `https://img.example/${account}-new.png`);
  const webhook = (/** @type {string} */ account) => {
    const body = JSON.stringify({ account });
    const timestamp = String(Math.floor(Date.now() / 1000));
    return fetch(`${stack.base}/hooks/avatar`, {
      method: 'POST',
      body,
      headers: { 'x-timestamp': timestamp, 'x-signature': `sha256=${sign('chaos-key', timestamp, Buffer.from(body))}` },
    });
  };
  const answers = await Promise.all(accounts.map(webhook));
  assert.deepEqual([...new Set(answers.map((answer) => answer.status))], [202]);
  await stack.kill('redis'); // right after the 202s: whatever was acknowledged must survive
  // supervisord may be restarting it already: stop it wherever it is
  await stack.ctl('stop', 'redis').catch((/** @type {any} */ err) => {
    if (!/not running/i.test(err.stdout)) throw err;
  });
  assert.equal(await stack.pid('redis'), 0, 'redis is down');
  try {
    assert.equal((await get(image)).status, 200, 'a cached image');
    assert.equal((await get(variant(image, 'width=33'))).status, 200, 'a new variant of an upload needs no Redis');
    const avatar = await fetch(`${stack.base}/u/nobody-known/avatar`, { redirect: 'manual' });
    assert.equal(avatar.status, 302, 'the resolver degrades to the default avatar');
    assert.equal(avatar.headers.get('cache-control'), 'public, max-age=60, s-maxage=60');
    const refused = await webhook('during-outage');
    assert.equal(refused.status, 503);
    assert.ok(refused.headers.get('retry-after'));
  } finally {
    await stack.start('redis');
  }
  await waitFor(
    async () => {
      const now = await Promise.all(accounts.map(location));
      return now.every((target, i) => target !== old[i]);
    },
    30_000,
    'every acknowledged change visible through varnish after Redis came back',
  );
  assert.equal(await redis.xlen('purge:dead'), 0);
  await stack.settled();
}

test('varnish restarted: concurrent misses for one URL reach the origin once', async () => {
  const image = await upload(await solid(640, 480, 'jpeg'), 'herd.jpg');
  const varnishPid = await stack.pid('varnish');
  await stack.ctl('restart', 'varnish');
  assert.ok(![0, varnishPid].includes(await stack.pid('varnish')), 'varnish runs under a new pid');
  await waitFor(async () => (await fetch(`${stack.base}/healthz`)).status === 200, 15_000, 'varnish back');
  const before = await metricValue(originMetrics(), 'http_request_duration_seconds_count', { route: 'proxy' });
  const url = variant(image, 'width=321');
  const answers = await Promise.all(Array.from({ length: 50 }, () => get(url)));
  assert.deepEqual([...new Set(answers.map((answer) => answer.status))], [200]);
  const afterCount = await metricValue(originMetrics(), 'http_request_duration_seconds_count', { route: 'proxy' });
  assert.equal(afterCount - before, 1, 'varnish coalesced 50 misses into one origin request');
});

// The targets (rejections p99 < 50 ms, hits and avatars p99 < 10 ms) are bench/overload's, held over 60 s on
// a machine doing nothing else. On a busy 2-core machine a test only proves that refusals, hits and avatars
// never wait behind transforms: each p99 a quarter of the served requests' at most (those wait for a slot:
// seconds). A fixed bound did not hold there: in a CI run beside the fresh-machine stage (2026-11-27)
// refusals' p99 was 680 ms and hits' 110 ms, against 4,900 ms served. The first 2 s are a warm-up.
test('overload at 10× the transform capacity: fast 503s, flat memory, the fast paths unharmed, the queue drains', async () => {
  const result = await runOverload(stack, { seconds: 10, warmupSeconds: 2, token: 'chaos' });
  process.stdout.write(`# overload ${JSON.stringify(result)}\n`);
  assert.equal(result.other, 0, 'only 200s and 503s');
  assert.ok(result.rejected > result.sent / 2, `most of the excess refused: ${result.rejected} of ${result.sent}`);
  assert.equal(result.rejectionsWithRetryAfter, result.rejected, 'every 503 says when to retry');
  for (const [what, p99] of Object.entries({
    refusals: result.rejectionP99,
    'cache hits': result.hitP99,
    avatars: result.avatarP99,
  }))
    assert.ok(
      p99 * 4 < result.servedP99,
      `${what} (p99 ${p99} ms) never wait behind transforms (served p99 ${result.servedP99} ms)`,
    );
  assert.ok(result.peakRss < 512, `origin RSS ${result.peakRss} MB`);
  assert.equal(result.afterStatus, 200, 'new work is served again once the queue drained');
});

/** be_uploads' sessions at haproxy now: uploads the origins are receiving. */
async function uploadSessions() {
  const row = (await stack.haproxyStats()).find(
    (fields) => fields.pxname === 'be_uploads' && fields.svname === 'BACKEND',
  );
  return Number(row?.scur || 0);
}

test('300 slow uploads (a byte a second): bounded at nginx, no origin slot held, /p/ misses served as usual, then cut off', async () => {
  const source = await upload(await solid(800, 600, 'jpeg'), 'slow-source.jpg');
  /** @param {number} from */
  const misses = async (from) => {
    const times = [];
    for (let width = from; width < from + 10; width += 1) {
      const result = await get(variant(source, `width=${width}`));
      assert.equal(result.status, 200);
      times.push(result.ms);
    }
    return times;
  };
  const usual = await misses(200);
  const { default: net } = await import('node:net');
  /** @type {Array<{ socket: import('node:net').Socket, answer: string, closedAfter: number }>} */
  const clients = [];
  const started = performance.now();
  for (let i = 0; i < 300; i += 1) {
    const socket = net.connect(Number(stack.env.NGINX_PORT), '127.0.0.1');
    const client = { socket, answer: '', closedAfter: 0 };
    socket.on('data', (chunk) => {
      client.answer += chunk.toString();
    });
    socket.on('close', () => {
      client.closedAfter = performance.now() - started;
    });
    socket.on('error', () => {});
    socket.write(
      'POST /upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer chaos\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000000\r\n\r\n--b',
    );
    clients.push(client);
  }
  const drip = setInterval(() => {
    for (const { socket } of clients) if (!socket.destroyed) socket.write('x');
  }, 1000);
  try {
    await waitFor(
      async () => clients.filter((client) => client.answer.startsWith('HTTP/1.1 429')).length >= 290,
      15_000,
      'uploads past the per-client bound refused',
    );
    const during = await misses(300);
    assert.equal(await uploadSessions(), 0, 'no slow upload reached an origin: nginx holds them');
    const limit = Math.max(...usual) * 5 + 2000;
    assert.ok(
      Math.max(...during) < limit,
      `misses under the slow uploads: ${during.map(Math.round)} ms (usual ${usual.map(Math.round)})`,
    );
    const admitted = clients.filter((client) => !client.answer);
    assert.ok(admitted.length <= Number(4), `${admitted.length} slow uploads admitted (NGINX_UPLOADS_PER_CLIENT 4)`);
    for (const { answer } of clients.filter((client) => client.answer))
      assert.match(answer, /^HTTP\/1\.1 429[^]*"too_many_requests"/);
    // while they hold this client's upload slots, its next upload (at full speed) is refused too
    assert.equal(admitted.length, 4);
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(await solid(64, 64, 'png'))]), 'after.png');
    const refused = await fetch(`${stack.base}/upload`, {
      method: 'POST',
      headers: { authorization: 'Bearer chaos' },
      body: form,
    });
    assert.equal(refused.status, 429, 'the per-client bound holds while the slow uploads are in progress');
    // 10 s of grace (NGINX_CLIENT_BODY_TIMEOUT_S), then a body must average 4096 bytes a second: cut off
    await waitFor(
      async () => admitted.every((client) => client.closedAfter > 0),
      30_000,
      'the admitted slow uploads cut off',
    );
    for (const client of admitted) {
      assert.match(client.answer, /^HTTP\/1\.1 408[^]*"request_timeout"/, 'a JSON 408');
      assert.ok(client.closedAfter > 9000, `cut off after ${Math.round(client.closedAfter)} ms, not before the grace`);
    }
    await upload(await solid(64, 64, 'png'), 'after.png');
  } finally {
    clearInterval(drip);
    for (const { socket } of clients) socket.destroy();
  }
});
