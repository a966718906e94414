import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import sharp from 'sharp';
import { DirLock } from '../src/cache/dir-lock.js';
import { PackCache, recordHeader } from '../src/cache/pack-cache.js';
import { decode } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { startOrigin } from './harness.js';

/** A JPEG of noise: its variants do not compress to nothing. @param {number} width @param {number} height */
function noise(width, height) {
  return sharp({
    create: { width, height, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 40 } },
  })
    .jpeg({ quality: 90 })
    .toBuffer();
}

/** @param {string} url */
async function get(url) {
  const response = await fetch(url);
  const body = Buffer.from(await response.arrayBuffer());
  assert.equal(response.status, 200, `${url}: ${body.toString().slice(0, 200)}`);
  return { body, timing: response.headers.get('server-timing'), info: await decode(body) };
}

/** Until the origin's result-cache index is rebuilt after a start. @param {{ metricsUrl: string }} origin */
async function indexBuilt(origin) {
  await waitFor(
    async () => (await metricValue(origin.metricsUrl, 'origin_result_cache_index_building')) === 0,
    30_000,
    'the result-cache index',
  );
}

/** @param {string} dir the origin's data directory @returns {string[]} its result cache's segment files, oldest first */
function segments(dir) {
  const variants = path.join(dir, 'variants');
  return fs
    .readdirSync(variants)
    .filter((name) => name.endsWith('.pack'))
    .sort()
    .map((name) => path.join(variants, name));
}

test('after a crash, variants answered before it come from the result cache byte for byte; a torn or corrupt tail is cut off and made again, never served', async () => {
  const origin = await startOrigin();
  try {
    const url = origin.site.add('crash.jpg', await noise(400, 300));
    const made = () => metricValue(origin.metricsUrl, 'origin_transforms_total');
    const [a, b, c] = [100, 120, 140].map((width) => origin.proxied(url, { width }));
    const first = { a: await get(a), b: await get(b), c: await get(c) };
    await origin.kill(); // SIGKILL: no shutdown of any kind

    const [newest] = segments(origin.dataDir).slice(-1);
    const bytes = fs.readFileSync(newest);
    bytes[bytes.length - 1] ^= 0xff; // the last byte of c's record: a sector that never reached the disk
    // and the start of a record whose end never came (its header says more bytes than follow)
    fs.writeFileSync(newest, Buffer.concat([bytes, bytes.subarray(0, 200)]));

    await origin.start();
    await indexBuilt(origin);
    assert.ok(fs.statSync(newest).size <= bytes.length - first.c.body.length, "the segment is cut before c's record");
    let before = await made();
    for (const [target, was] of /** @type {const} */ ([
      [a, first.a],
      [b, first.b],
    ])) {
      const again = await get(target);
      assert.equal(again.timing, 'cache;desc=hit');
      assert.ok(again.body.equals(was.body));
    }
    assert.equal((await made()) - before, 0);
    const remade = await get(c);
    assert.ok(remade.body.equals(first.c.body));
    assert.equal((await made()) - before, 1);

    // appends go on after the cut, and survive the next crash
    const d = origin.proxied(url, { width: 160 });
    const fresh = await get(d);
    await origin.kill();
    await origin.start();
    await indexBuilt(origin);
    before = await made();
    const kept = await get(d);
    assert.equal(kept.timing, 'cache;desc=hit');
    assert.ok(kept.body.equals(fresh.body));
    assert.equal((await made()) - before, 0);
  } finally {
    await origin.stop();
  }
});

test('the result cache stays within VARIANTS_CACHE_BYTES on disk; what is asked for stays, what nobody asks for again goes', async () => {
  const bound = 1024 * 1024;
  const origin = await startOrigin({ VARIANTS_CACHE_BYTES: String(bound) });
  try {
    const url = origin.site.add('many.jpg', await noise(800, 600));
    const made = () => metricValue(origin.metricsUrl, 'origin_transforms_total');
    const hot = origin.proxied(url, { width: 200 });
    const cold = origin.proxied(url, { width: 201 });
    await get(hot);
    await get(cold);
    let written = 0;
    const before = await made();
    for (let i = 0; i < 120; i += 1) {
      const { body } = await get(origin.proxied(url, { width: 300 + i }));
      written += body.length;
      if (i % 10 === 9) await get(hot);
    }
    assert.ok(written > 2 * bound, `the variants made (${written} bytes) are more than twice the bound`);
    const onDisk = segments(origin.dataDir).reduce((sum, file) => sum + fs.statSync(file).size, 0);
    assert.ok(onDisk <= bound, `${onDisk} bytes on disk for a bound of ${bound}`);
    assert.ok(onDisk > bound / 2, `${onDisk} bytes on disk: the cache is used up to near its bound`);

    // the hot variant, asked for every 10 new ones, was never made again; the cold one, asked once, is
    assert.equal((await get(hot)).timing, 'cache;desc=hit');
    assert.equal((await made()) - before, 120);
    assert.notEqual((await get(cold)).timing, 'cache;desc=hit');
    assert.equal((await made()) - before, 121);
  } finally {
    await origin.stop();
  }
});

test('an origin refuses a result cache directory that another live process holds', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pack-'));
  const other = spawn('sleep', ['30']);
  t.after(() => {
    other.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  fs.writeFileSync(path.join(dir, 'lock'), String(other.pid));
  assert.throws(() => new PackCache(dir, 1024 * 1024).init(), /in use by process/);
  other.kill();
  await new Promise((resolve) => other.once('exit', resolve));
  const cache = new PackCache(dir, 1024 * 1024);
  cache.init(); // a lock left by a process that is gone is taken over
  cache.put('a'.repeat(64), 'jpg', Buffer.from('bytes'));
  const entry = cache.get('a'.repeat(64));
  assert.ok(entry);
  assert.equal((await cache.read(entry)).toString(), 'bytes');
  await cache.close();
  assert.ok(!fs.existsSync(path.join(dir, 'lock')));
});

/**
 * Segments of small made-up variants, as an origin with a large result cache leaves them (no index files: the
 * layout of before them, or a crash), numbered from `first`. @param {string} dir @param {number} first @param {number} count @param {number} records each
 */
function writeSegments(dir, first, count, records) {
  const data = Buffer.alloc(100, 7);
  for (let s = 0; s < count; s += 1) {
    const keys = randomBytes(32 * records).toString('hex');
    const parts = [];
    for (let r = 0; r < records; r += 1) parts.push(recordHeader(keys.slice(r * 64, r * 64 + 64), 'webp', data), data);
    fs.writeFileSync(path.join(dir, `${String(first + s).padStart(8, '0')}.pack`), Buffer.concat(parts));
  }
}

test('an origin answers while its result-cache index is rebuilt after a start; once built, what was cached before is served from it', async () => {
  const origin = await startOrigin({ VARIANTS_CACHE_BYTES: String(2 * 1024 ** 3) });
  try {
    const url = origin.site.add('rebuild.jpg', await noise(400, 300));
    const made = () => metricValue(origin.metricsUrl, 'origin_transforms_total');
    const building = () => metricValue(origin.metricsUrl, 'origin_result_cache_index_building');
    const before = await get(origin.proxied(url, { width: 110 }));
    await origin.kill();
    // 2.4 million cached variants in the segments after the real one's: indexed first (newest first)
    writeSegments(path.join(origin.dataDir, 'variants'), 2, 12, 200_000);

    await origin.start();
    assert.equal(await building(), 1, 'the origin is up before its index is built');
    const fresh = await get(origin.proxied(url, { width: 130 }));
    assert.equal(fresh.info.width, 130);
    assert.equal(await building(), 1, 'and answered a miss meanwhile');

    await indexBuilt(origin);
    const count = await made();
    const again = await get(origin.proxied(url, { width: 110 }));
    assert.equal(again.timing, 'cache;desc=hit');
    assert.ok(again.body.equals(before.body));
    assert.equal((await get(origin.proxied(url, { width: 130 }))).timing, 'cache;desc=hit');
    assert.equal(await made(), count);
    const indexBytes = await metricValue(origin.metricsUrl, 'origin_result_cache_index_bytes');
    assert.ok(indexBytes / 2_400_000 <= 64, `${indexBytes} bytes of index for 2.4 million variants`);
  } finally {
    await origin.stop();
  }
});

/**
 * Holds a result cache directory from a process of a pid namespace of its own (as a container's origin: pid 1),
 * on host name `host`, until killed; resolves with its output once it says it holds it or exits. Null where
 * namespaces can't be made here. @param {string} dir @param {string} host
 */
async function holdInOwnNamespace(dir, host) {
  const script = `import { PackCache } from ${JSON.stringify(path.resolve('src/cache/pack-cache.js'))};
    try { new PackCache(${JSON.stringify(dir)}, 1024 * 1024).init(); console.log('held by', process.pid); }
    catch (err) { console.log(err.message); process.exit(3); }
    setInterval(() => {}, 1000);`;
  const asRoot = process.getuid?.() === 0 ? [] : ['--user', '--map-root-user'];
  const node = `exec ${JSON.stringify(process.execPath)} --input-type=module -e "$0"`;
  const unshare = [...asRoot, '--uts', '--pid', '--fork', '--kill-child', '--mount-proc'];
  const child = spawn('unshare', [...unshare, 'sh', '-c', `hostname ${host} && ${node}`, script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (chunk) => (out += chunk));
  child.stderr.on('data', (chunk) => (out += chunk));
  const code = await new Promise((resolve) => {
    child.once('exit', resolve);
    child.stdout.on('data', () => out.includes('held by') && resolve(null));
  });
  if (code !== null && !out.includes('in use')) return { child, out: null, why: out.trim() };
  return { child, out: out.trim() };
}

test('two origins in pid namespaces of their own (containers) never share a result cache directory', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pack-'));
  const children = [];
  t.after(() => {
    for (const child of children) child.kill('SIGKILL'); // (unshare leaves SIGTERM to the program; --kill-child ends it)
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const first = await holdInOwnNamespace(dir, 'origin-1');
  children.push(first.child);
  if (first.out === null) return t.skip(`no pid namespace here: ${first.why}`);
  assert.equal(first.out, 'held by 1'); // as each container's origin
  const second = await holdInOwnNamespace(dir, 'origin-2');
  children.push(second.child);
  assert.match(String(second.out), /in use by process 1 on origin-1 \(another container or machine sharing it\)/);
  // nor in this one's
  assert.throws(() => new PackCache(dir, 1024 * 1024).init(), /in use by process 1 on/);
});

/** A lock file's text as an origin in another container (pid 1 there) on `host` writes it. @param {string} host */
function lockElsewhere(host) {
  const boot = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  return JSON.stringify({ pid: 1, space: `${boot}/pid:[1]`, host });
}

test('a result cache lock: stale elsewhere taken over, a container restarted takes its own, a lost one stops the cache', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pack-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const lock = path.join(dir, 'lock');
  fs.writeFileSync(lock, lockElsewhere('other-container'));
  assert.throws(() => new PackCache(dir, 1024 * 1024).init(), /in use by process 1 on other-container/);
  // not renewed for a minute: its holder is gone
  const old = new Date(Date.now() - 60_000);
  fs.utimesSync(lock, old, old);
  const cache = new PackCache(dir, 1024 * 1024);
  cache.init();
  await cache.close();
  // this container's own earlier run (its host name, another pid namespace), renewed just now: taken at once
  fs.writeFileSync(lock, lockElsewhere(os.hostname()));
  const again = new PackCache(dir, 1024 * 1024);
  again.init();
  again.put('b'.repeat(64), 'jpg', Buffer.from('bytes'));
  assert.ok(again.get('b'.repeat(64)));
  // taken over by another (two took a stale lock at once, or it was removed by hand): this one stops using it
  fs.writeFileSync(lock, lockElsewhere('other-container'));
  again.dirLock.renew();
  assert.equal(again.get('b'.repeat(64)), null);
  again.put('c'.repeat(64), 'jpg', Buffer.from('more'));
  assert.equal(again.get('c'.repeat(64)), null);
  await again.close();
  assert.ok(fs.existsSync(lock), "the other holder's lock is left alone");
});

test('an origin waits for a lock elsewhere to go stale (a pod replaced after its predecessor was killed), not for one still renewed', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pack-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const lock = path.join(dir, 'lock');
  const elsewhere = lockElsewhere('killed-pod');
  fs.writeFileSync(lock, elsewhere);
  const lastRenewed = new Date(Date.now() - 13_500); // stale at 15 s
  fs.utimesSync(lock, lastRenewed, lastRenewed);
  const cache = new PackCache(dir, 1024 * 1024);
  const waits = [];
  const started = Date.now();
  await cache.dirLock.waitForStale((holder) => waits.push(holder.host));
  assert.deepEqual(waits, ['killed-pod']);
  assert.ok(Date.now() - started >= 1000, `waited ${Date.now() - started} ms`);
  cache.init();
  await cache.close();

  // a holder that goes on renewing is there: waited for a while, then refused
  fs.writeFileSync(lock, elsewhere);
  const renewing = setInterval(() => fs.utimesSync(lock, new Date(), new Date()), 50);
  t.after(() => clearInterval(renewing));
  const short = new DirLock(lock, { staleMs: 400, renewMs: 100 });
  await short.waitForStale();
  assert.throws(() => short.take(), /in use by process 1 on killed-pod/);
});
