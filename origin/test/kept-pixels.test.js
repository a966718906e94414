// #48: one decode per picture. The frontends' set of variants of one photograph (condenser's post and feed
// sizes, ecency's srcset widths, in JPEG and WebP) is made from one decode of the whole picture: the pixels
// kept by the first variant that decodes it whole (kept-pixels.js) make the rest, as close to the source as a
// variant made from the original (SSIM within 0.002); concurrent wide requests decode once; an AVIF (made in a
// worker) starts from them too; they leave by bytes, by time and with a takedown.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import sharp from 'sharp';
import { sha256Hex } from '@stack/lib';
import { FRONTEND_SET as SET } from '../../test/support/frontend-set.js';
import { meanDifference, photo } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { ssimToSource } from '../../test/support/ssim.js';
import { startOrigin } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let direct;
before(async () => {
  // kept pixels on (off by default: KEPT_PIXELS_BYTES=0) beside the same origin without them
  [origin, direct] = await Promise.all([startOrigin({ KEPT_PIXELS_BYTES: '128mb' }), startOrigin()]);
});
after(async () => {
  await origin?.stop();
  await direct?.stop();
});

/** @param {typeof origin} at @param {string} result */
const kept = (at, result) => metricValue(at.metricsUrl, 'origin_kept_pixels_total', { result });
/** The bytes of kept pixels held by `holder` (origin, warm_workers). @param {typeof origin} at @param {string} holder */
const held = (at, holder) => metricValue(at.metricsUrl, 'origin_kept_pixels_bytes', { holder });
/** Variants encoded from another format's resized pixels (no resize). @param {typeof origin} at */
const shared = (at) => metricValue(at.metricsUrl, 'origin_shared_resizes_total');
/** A 2560 × 1600 photograph's kept pixels, whole: 3 bytes a pixel. */
const PHOTO_KEPT_BYTES = 2560 * 1600 * 3;
/** @param {typeof origin} at @param {string} decode */
const decodedBy = async (at, decode) => {
  let total = 0;
  for (const encode of ['sharp', 'libwebp', 'libjpeg-turbo'])
    total += await metricValue(at.metricsUrl, 'origin_transform_codecs_total', { decode, encode });
  return total;
};

/** A takedown's eviction of `url`'s source, as the purge service sends it. @param {typeof origin} at @param {string} url */
async function evict(at, url) {
  const redis = new Redis(at.redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.publish('takedown:evict', JSON.stringify({ sources: { [sha256Hex(url)]: [] } }));
  } finally {
    redis.disconnect();
  }
}

/** @param {string} url @param {string} [accept] @param {Record<string, string>} [headers] */
async function get(url, accept, headers = {}) {
  const response = await fetch(url, { headers: { ...headers, ...(accept ? { accept } : {}) } });
  const body = Buffer.from(await response.arrayBuffer());
  assert.equal(response.status, 200, body.toString().slice(0, 200));
  return body;
}

/**
 * The frontends' set in JPEG and WebP, each variant asked of `url` at `at` (with `headers`) and of `referenceUrl`
 * at `reference`, in turn. @param {typeof origin} at @param {string} url @param {typeof origin} reference
 * @param {string} referenceUrl @param {Record<string, string>} [headers]
 */
async function askSet(at, url, reference, referenceUrl, headers = {}) {
  /** @type {Buffer[]} */
  const ours = [];
  /** @type {Buffer[]} */
  const theirs = [];
  for (const accept of [undefined, 'image/webp,*/*']) {
    for (const query of SET) {
      ours.push(await get(at.proxied(url, /** @type {any} */ (query)), accept, headers));
      theirs.push(await get(reference.proxied(referenceUrl, /** @type {any} */ (query)), accept));
    }
  }
  return { ours, theirs };
}

/**
 * Each variant of `ours` the format and size of the same one of `theirs`, and as close to the source (SSIM within
 * 0.002). @param {string} file @param {Buffer[]} ours @param {Buffer[]} theirs
 */
async function assertAsClose(file, ours, theirs) {
  for (const [i, body] of ours.entries()) {
    const [a, b] = [await sharp(body).metadata(), await sharp(theirs[i]).metadata()];
    assert.deepEqual([a.format, a.width, a.height], [b.format, b.width, b.height], `variant ${i}: the same size`);
    const [mine, before] = [await ssimToSource(file, body), await ssimToSource(file, theirs[i])];
    assert.ok(mine >= before - 0.002, `variant ${i}: SSIM ${mine.toFixed(4)} against ${before.toFixed(4)} before`);
  }
}

test("the frontends' 18 variants of a photograph, in JPEG and WebP: one decode, each as close to the source as before", async () => {
  const file = photo('Path', '2560x1600');
  const bytes = fs.readFileSync(file);
  const [url, directUrl] = [origin.site.add('set.jpg', bytes), direct.site.add('set.jpg', bytes)];
  const { ours, theirs } = await askSet(origin, url, direct, directUrl);
  // the first (768 wide) decodes a quarter of the picture alone, as before; the second (1536), of a source
  // asked again, decodes it whole anyway and keeps it; every other variant is made from those pixels
  assert.equal(await kept(origin, 'alone'), 1);
  assert.equal(await kept(origin, 'made'), 1, 'one decode of the whole picture for the set');
  assert.equal(await kept(origin, 'hit'), ours.length - 2);
  assert.equal(await decodedBy(origin, 'kept'), ours.length - 2, 'every variant after the second: no decode');
  assert.equal(await decodedBy(origin, 'libjpeg-turbo'), 2, 'the two decodes, by the system libjpeg-turbo');
  assert.equal(await decodedBy(direct, 'kept'), 0);
  // the WebPs of the sizes whose JPEG was made from the kept pixels (all but the first): no resize either
  assert.equal(await shared(origin), SET.length - 1, "encoded from the JPEG's resized pixels");
  assert.equal(await shared(direct), 0);
  await assertAsClose(file, ours, theirs);
});

test("a size's second format is encoded from the first's resized pixels: the bytes its own resize makes", async () => {
  const bytes = fs.readFileSync(photo('Kite', '2560x1600'));
  const [pair, alone] = [origin.site.add('pair.jpg', bytes), origin.site.add('alone.jpg', bytes)];
  const webp = 'image/webp,*/*';
  /** @type {Array<Record<string, number>>} */
  const sizes = [{ width: 800 }, { width: 320 }, { width: 640, height: 480 }];
  // each source's pixels kept by its 1536-wide WebP (asked again: the JPEG first decoded alone)
  for (const url of [pair, alone])
    for (const accept of [undefined, webp]) await get(origin.proxied(url, { width: 1536 }), accept);
  const before = await shared(origin);
  /** @type {Buffer[]} */
  const paired = [];
  for (const size of sizes) {
    await get(origin.proxied(pair, size));
    paired.push(await get(origin.proxied(pair, size), webp));
  }
  assert.equal((await shared(origin)) - before, sizes.length, "each WebP from its JPEG's resized pixels");
  for (const [i, size] of sizes.entries()) {
    const own = await get(origin.proxied(alone, size), webp);
    assert.ok(own.equals(paired[i]), `${JSON.stringify(size)}: the same bytes as the WebP resized for itself`);
  }
  assert.equal((await shared(origin)) - before, sizes.length, "the other source's WebPs resized for themselves");
  // the warmer's pairs (an AVIF, then the WebP of its size) in the warm worker of the defaults
  const warmed = direct.site.add('pair-warm.jpg', bytes);
  const warm = { 'x-warm': '1' };
  for (const accept of [undefined, webp]) await get(direct.proxied(warmed, { width: 1536 }), accept, warm);
  const sharedBefore = await shared(direct);
  await get(direct.proxied(warmed, { width: 800 }), 'image/avif,image/webp,*/*', warm);
  const fromAvif = await get(direct.proxied(warmed, { width: 800 }), webp, warm);
  assert.equal((await shared(direct)) - sharedBefore, 1, "the WebP from the AVIF's resized pixels");
  assert.ok(fromAvif.equals(paired[0]), 'the same bytes as the WebP resized for itself');
});

test('a Display P3, a greyscale, a CMYK JPEG and a PNG with alpha: their variants from kept pixels look as made from the file', async () => {
  const base = sharp(photo('Kite', '1920x1080')).resize(900);
  const sources = {
    p3: await base.clone().withIccProfile('p3').jpeg().toBuffer(),
    grey: await base.clone().toColourspace('b-w').jpeg().toBuffer(),
    cmyk: await base.clone().toColourspace('cmyk').jpeg().toBuffer(),
    alpha: await base.clone().ensureAlpha(0.5).png().toBuffer(),
  };
  for (const [name, bytes] of Object.entries(sources)) {
    const [url, directUrl] = [origin.site.add(`${name}-c`, bytes), direct.site.add(`${name}-c`, bytes)];
    // asked twice at a size whose own decode is the whole picture: the second keeps it
    await get(origin.proxied(url, { width: 500, format: 'png' }));
    await get(origin.proxied(url, { width: 600, format: 'png' }));
    const hits = await kept(origin, 'hit');
    const [ours, theirs] = [
      await get(origin.proxied(url, { width: 256, format: 'png' })),
      await get(direct.proxied(directUrl, { width: 256, format: 'png' })),
    ];
    const [a, b] = await Promise.all(
      [ours, theirs].map((body) => sharp(body).raw().toBuffer({ resolveWithObject: true })),
    );
    assert.deepEqual(
      [a.info.width, a.info.height, a.info.channels],
      [b.info.width, b.info.height, b.info.channels],
      name,
    );
    const difference = meanDifference(a.data, b.data);
    assert.ok(difference < 1.5, `${name}: ${difference.toFixed(2)} levels from the variant made from the file`);
    assert.equal((await kept(origin, 'hit')) - hits, 1, `${name}: made from the kept pixels`);
  }
});

test('concurrent requests of different sizes of a source decode the whole picture once; an AVIF (a worker) starts from the kept pixels', async () => {
  const url = origin.site.add('burst.jpg', fs.readFileSync(photo('Autumn', '1920x1200')));
  await get(origin.proxied(url, { width: 200 })); // seen once: the next wide variant keeps its pixels
  const made = await kept(origin, 'made');
  // wide sizes, each decoding the whole picture on its own: one decode for all six
  await Promise.all([1300, 1400, 1500, 1600, 1700, 1800].map((width) => get(origin.proxied(url, { width }))));
  assert.equal((await kept(origin, 'made')) - made, 1, 'one decode for six sizes asked at once');
  const fromKept = await decodedBy(origin, 'kept');
  // a worker is given a copy of them for a variant that would decode as much itself
  const avif = await get(origin.proxied(url, { width: 1350, format: 'avif' }));
  assert.equal((await sharp(avif).metadata()).format, 'heif');
  assert.equal((await decodedBy(origin, 'kept')) - fromKept, 1, 'the AVIF made from the kept pixels');
});

test("the warmer's set of a photograph with the defaults (KEPT_PIXELS_BYTES 0): one decode in its worker, each variant as close to the source as a reader's", async () => {
  const file = photo('Kite', '2560x1600');
  const bytes = fs.readFileSync(file);
  // the same picture twice at the origin of the defaults: one name warmed, the other asked by readers
  const [warmed, read] = [direct.site.add('warmed.jpg', bytes), direct.site.add('read.jpg', bytes)];
  const fromKept = await decodedBy(direct, 'kept');
  const results = () => Promise.all(['alone', 'made', 'hit'].map((result) => kept(direct, result)));
  const counted = await results();
  const sharedBefore = await shared(direct);
  const { ours, theirs } = await askSet(direct, warmed, direct, read, { 'x-warm': '1' });
  // the first (768 wide) decodes a quarter of the picture, the second (1536) the whole and its worker keeps it
  assert.equal((await decodedBy(direct, 'kept')) - fromKept, ours.length - 2, 'every warm variant after the second');
  // the metrics say so too, though the pixels never left the worker: one alone, one made, the rest hits
  const deltas = (await results()).map((count, i) => count - counted[i]);
  assert.deepEqual(deltas, [1, 1, ours.length - 2], 'origin_kept_pixels_total: alone, made, hit');
  assert.equal(
    (await shared(direct)) - sharedBefore,
    SET.length - 1,
    "the WebPs from the JPEGs' resized pixels, in the worker too",
  );
  assert.ok((await held(direct, 'warm_workers')) >= PHOTO_KEPT_BYTES, 'the bytes the warm worker holds');
  assert.equal(await held(direct, 'origin'), 0, 'none in the origin (KEPT_PIXELS_BYTES 0)');
  await assertAsClose(file, ours, theirs);
});

test("a warmer's variant larger than the pixels its worker keeps is made from the file, not from them enlarged", async () => {
  // pixels kept a quarter of the picture wide (640 of 2560), by the warmer's second variant that decodes as much
  const small = await startOrigin({ KEPT_PIXELS_BYTES: '128mb', KEPT_PIXELS_WIDTH: '640' });
  try {
    const file = photo('Path', '2560x1600');
    const [url, directUrl] = [
      small.site.add('warm.jpg', fs.readFileSync(file)),
      direct.site.add('warm.jpg', fs.readFileSync(file)),
    ];
    const warm = { 'x-warm': '1' };
    for (const width of [600, 610, 620]) await get(small.proxied(url, { width }), undefined, warm);
    assert.equal(await decodedBy(small, 'kept'), 1, "the warmer's third variant made from its worker's kept pixels");
    const ours = await get(small.proxied(url, { width: 1600 }), undefined, warm);
    const theirs = await get(direct.proxied(directUrl, { width: 1600 }));
    assert.equal((await sharp(ours).metadata()).width, 1600);
    const [mine, before] = [await ssimToSource(file, ours), await ssimToSource(file, theirs)];
    assert.ok(mine >= before - 0.002, `SSIM ${mine.toFixed(4)} against ${before.toFixed(4)} made from the file`);
    assert.equal(await decodedBy(small, 'kept'), 1, 'the wide one decoded from the file');
  } finally {
    await small.stop();
  }
});

test('kept pixels leave with a takedown, past KEPT_PIXELS_TTL_S and past KEPT_PIXELS_BYTES', async () => {
  const short = await startOrigin({ KEPT_PIXELS_TTL_S: '1', KEPT_PIXELS_BYTES: '20mb' });
  try {
    const [a, b] = ['Path', 'Autumn'].map((name) =>
      short.site.add(`${name}.jpg`, fs.readFileSync(photo(name, '1920x1200'))),
    );
    const made = () => kept(short, 'made');
    // wide variants: their own decode is the whole picture, so the second keeps it
    await get(short.proxied(a, { width: 1300 }));
    await get(short.proxied(a, { width: 1301 }));
    await get(short.proxied(a, { width: 1304 }));
    assert.equal(await made(), 1);
    // 12.3 MB each (these photographs are 2560 × 1600 whatever their names, kept whole): the second source's push the first's out
    await get(short.proxied(b, { width: 1300 }));
    await get(short.proxied(b, { width: 1301 }));
    await get(short.proxied(a, { width: 1302 }));
    assert.equal(await made(), 3, 'the first decoded again once the second took its room');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await get(short.proxied(a, { width: 1303 }));
    assert.equal(await made(), 4, 'decoded again past the time they are kept');
  } finally {
    await short.stop();
  }
  // a takedown's eviction (the purge service's message) drops them with the source's variants: in a warm
  // worker too (the default origin: its warmer's variants share a decode there)
  const warmUrl = direct.site.add('taken-warm.jpg', fs.readFileSync(photo('Kite', '1920x1200')));
  const warm = { 'x-warm': '1' };
  const fromFile = () => decodedBy(direct, 'libjpeg-turbo');
  await get(direct.proxied(warmUrl, { width: 768 }), undefined, warm);
  await get(direct.proxied(warmUrl, { width: 1536 }), undefined, warm);
  let decodes = await fromFile();
  await get(direct.proxied(warmUrl, { width: 800 }), undefined, warm);
  assert.equal(await fromFile(), decodes, "made from the warm worker's pixels");
  const heldBefore = await held(direct, 'warm_workers');
  await evict(direct, warmUrl);
  let width = 801;
  await waitFor(
    async () => {
      decodes = await fromFile();
      await get(direct.proxied(warmUrl, { width: width++ }), undefined, warm);
      return (await fromFile()) > decodes;
    },
    10_000,
    "the warm worker's pixels dropped: its next variant decoded from the file",
  );
  const heldAfter = await held(direct, 'warm_workers');
  assert.ok(heldAfter <= heldBefore - PHOTO_KEPT_BYTES, `held by the warm worker: ${heldBefore} → ${heldAfter}`);
  const url = origin.site.add('taken.jpg', fs.readFileSync(photo('Kite', '1920x1200')));
  await get(origin.proxied(url, { width: 1310 }));
  await get(origin.proxied(url, { width: 1311 }));
  const before = await kept(origin, 'made');
  await evict(origin, url);
  await waitFor(
    async () => {
      await get(origin.proxied(url, { width: 1312 + Math.floor(Math.random() * 100) }));
      return (await kept(origin, 'made')) > before;
    },
    10_000,
    'decoded again after the eviction',
  );
});
