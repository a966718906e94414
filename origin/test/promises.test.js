// Promises that only the whole-stack tier caught when broken one at a time (#53's mutation check), held here
// at the origin in the unit tier: format=match negotiated from Accept, never an answer larger than an original
// that would do, a warmed original kept in the archive, a rotated HEIC upload served upright.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { heifEnc, heifFile, pictureOf } from '../../test/support/heif.js';
import { decode, photo } from '../../test/support/images.js';
import { startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
before(async () => {
  origin = await startOrigin();
});
after(() => origin?.stop());

const CHROME = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

/** @param {string} url @param {Record<string, string>} [headers] */
async function get(url, headers = {}) {
  const response = await fetch(url, { headers });
  const body = Buffer.from(await response.arrayBuffer());
  return { response, body, info: response.status === 200 ? await decode(body) : null };
}

test('format=match is negotiated from Accept: WebP (then AVIF) to a browser, the source format without Accept', async () => {
  const matchUrl = origin.site.add('match.jpg', await sharp(photo('Path', '1280x800')).resize(640).jpeg().toBuffer());
  const url = origin.proxied(matchUrl, { width: 320, format: 'match' });
  const browser = await get(url, { accept: CHROME });
  assert.equal(browser.response.status, 200);
  assert.ok(
    ['webp', 'heif'].includes(/** @type {any} */ (browser.info).format),
    `a browser got ${browser.info?.format}`,
  );
  assert.match(String(browser.response.headers.get('vary')), /accept/i);
  const crawler = await get(url);
  assert.equal(crawler.info?.format, 'jpeg', 'no Accept: the source format');
  assert.equal(crawler.info?.width, 320);
});

test('a variant never larger than the original: a small, well-compressed original asked at its size is the original', async () => {
  const original = await sharp(photo('Path', '1280x800')).resize(200).jpeg({ quality: 20, mozjpeg: true }).toBuffer();
  const tinyUrl = origin.site.add('tiny.jpg', original);
  const asked = await get(origin.proxied(tinyUrl, { width: 200, format: 'jpeg' }));
  assert.equal(asked.response.status, 200);
  assert.ok(
    asked.body.length <= original.length,
    `${asked.body.length} bytes answered for a ${original.length}-byte original`,
  );
  assert.equal(asked.info?.width, 200);
});

test("a warm request's remote original is kept in the archive, and made from there once its host is gone", async () => {
  const target = origin.site.add('warm.jpg', await sharp(photo('Path', '1280x800')).resize(500).jpeg().toBuffer());
  const warmed = await fetch(origin.proxied(target, { width: 300 }), { headers: { 'x-warm': '1' } });
  assert.equal(warmed.status, 200, await warmed.clone().text());
  const ids = path.join(origin.dataDir, 'archive', 'ids');
  const kept = fs.existsSync(ids)
    ? fs.readdirSync(ids, { recursive: true }).filter((name) => String(name).length > 40)
    : [];
  assert.equal(kept.length, 1, 'the original is kept');
  // its host forgets it, and the originals cache is emptied: a new size still comes from the archive
  origin.site.add('warm.jpg', Buffer.from('gone'), 'text/plain');
  fs.rmSync(path.join(origin.dataDir, 'originals'), { recursive: true, force: true });
  await origin.restart();
  const later = await get(origin.proxied(target, { width: 222 }));
  assert.equal(later.response.status, 200);
  assert.equal(later.info?.width, 222);
});

test('a HEIC upload turned by irot is served upright', async () => {
  const landscape = await sharp(photo('Path', '1280x800')).resize(320, 200).toBuffer();
  const heic = heifFile([pictureOf(heifEnc(landscape))], { transforms: [['irot', 1]] });
  const uploaded = await tokenUpload(origin.base, heic, 'turned.heic');
  assert.equal(uploaded.status, 200, await uploaded.clone().text());
  const { url } = /** @type {{ url: string }} */ (await uploaded.json());
  const variant = await get(origin.proxied(url, { width: 100, format: 'jpeg' }));
  assert.equal(variant.response.status, 200);
  assert.equal(variant.info?.width, 100);
  assert.equal(variant.info?.height, 160, 'a quarter turn: 200 × 320, at 100 px wide');
});
