// Fewer bytes for every frontend (#40): the URLs condenser (/WxH/, format=match) and ecency (format=match,
// .webp) build, asked with Chrome's, Safari's, Firefox's and no Accept, through the whole edge. Photographs go
// AVIF (WebP first, AVIF made behind it) or WebP by Accept, with Vary: Accept and one varnish object per Accept
// class; no Accept gets the source's format; a screenshot with transparency goes lossless WebP with its alpha;
// an animated GIF an animated WebP of as many frames, looping the same; a variant that would be bigger is the
// original's bytes; a 600-frame GIF at 0x0 is the original (it was a 400).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { startImageServer } from './support/image-server.js';
import { animated, decode, photo } from './support/images.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

const BROWSERS = {
  chrome: 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8',
  safari:
    'image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5',
  firefox: 'image/avif,image/webp,*/*',
  old: 'image/png,image/*;q=0.8,*/*;q=0.5',
};

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {Awaited<ReturnType<typeof startImageServer>>} */
let site;
const urls = { photo: '', screenshot: '', gif: '', long: '', tiny: '' };

before(async () => {
  site = await startImageServer();
  urls.photo = site.add(
    'photo.jpg',
    await sharp(photo('Path', '1280x800')).resize(1600).jpeg({ quality: 90 }).toBuffer(),
  );
  const text = Array.from(
    { length: 12 },
    (_, i) =>
      `<text x="16" y="${40 + i * 22}" font-family="sans-serif" font-size="15" fill="#222">line ${i}: settings, menus and code 0123456789</text>`,
  ).join('');
  urls.screenshot = site.add(
    'screenshot.png',
    await sharp(
      Buffer.from(
        `<svg xmlns="http://www.w3.org/2000/svg" width="600" height="320"><rect x="0" y="0" width="600" height="24" fill="#2b5797"/>${text}</svg>`,
      ),
    )
      .png()
      .toBuffer(),
    'image/png',
  );
  // twelve frames of the photographs, 80 ms each, looping for ever
  const frames = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      sharp(photo(['Path', 'Autumn', 'Kite'][i % 3], '1280x800'))
        .resize(320, 200)
        .png()
        .toBuffer(),
    ),
  );
  urls.gif = site.add(
    'anim.gif',
    await sharp(frames, { join: { animated: true } })
      .gif({ loop: 0, delay: Array(12).fill(80) })
      .toBuffer(),
    'image/gif',
  );
  urls.long = site.add('long.gif', await animated(48, 48, 600, 'gif'), 'image/gif');
  urls.tiny = site.add('tiny.jpg', await sharp(photo('Path', '1280x800')).resize(200).jpeg({ quality: 20 }).toBuffer());
  stack = await startStack({
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1',
    CACHE_CONTROL_FIRST_ANSWER: 'public, max-age=1, s-maxage=1',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    VARNISH_MISS_LIMIT: '0',
  });
});
after(async () => {
  await stack?.stop();
  await site?.close();
});

/** GET through the edge, redirects followed. @param {string} path @param {string | undefined} accept */
async function get(path, accept) {
  const response = await fetch(new URL(path, stack.base), { headers: accept ? { accept } : {} });
  const body = Buffer.from(await response.arrayBuffer());
  return { response, body, info: response.status === 200 ? await decode(body) : null };
}

const condenser = (/** @type {string} */ url, /** @type {string} */ size) => `/${size}/${url}`;
const ecency = (/** @type {string} */ url, /** @type {number} */ width) =>
  `/p/${base58Url.encode(url)}?format=match&mode=fit&width=${width}`;

test("a photograph through condenser's and ecency's URLs: AVIF (WebP first) or WebP by Accept, the source's format without one, Vary: Accept", async () => {
  for (const path of [condenser(urls.photo, '768x0'), condenser(urls.photo, '256x512'), ecency(urls.photo, 640)]) {
    const chrome = await get(path, BROWSERS.chrome);
    assert.equal(chrome.response.status, 200);
    assert.equal(chrome.response.headers.get('vary'), 'Accept');
    assert.equal(chrome.info?.format, 'webp', `${path}: the first answer to an AVIF browser is WebP, at once`);
    // once the AVIF is made behind it (and the first answer's short lifetime ran out), the AVIF
    await waitFor(async () => (await get(path, BROWSERS.chrome)).info?.format === 'heif', 30_000, `${path}: the AVIF`);
    assert.equal((await get(path, BROWSERS.safari)).info?.format, 'heif', 'Safari takes AVIF');
    assert.equal((await get(path, BROWSERS.firefox)).info?.format, 'heif', 'Firefox takes AVIF');
    assert.equal((await get(path, 'image/webp,*/*')).info?.format, 'webp');
    assert.equal((await get(path, BROWSERS.old)).info?.format, 'jpeg', "a browser of neither: the source's format");
    assert.equal((await get(path, undefined)).info?.format, 'jpeg', "no Accept (a crawler, curl): the source's format");
  }
  const sized = await get(condenser(urls.photo, '768x0'), BROWSERS.chrome);
  assert.deepEqual([sized.info?.width, sized.info?.height], [768, 480]);
});

test('one varnish object per Accept class: Chrome, Safari and Firefox share the AVIF; WebP and none have one each', async () => {
  const path = ecency(urls.photo, 500);
  await get(path, BROWSERS.chrome);
  await waitFor(async () => (await get(path, BROWSERS.chrome)).info?.format === 'heif', 30_000, 'the AVIF');
  const objects = async () => (await stack.varnishStats())('MAIN.n_object');
  const before = await objects();
  for (const accept of [BROWSERS.safari, BROWSERS.firefox, BROWSERS.chrome])
    assert.equal((await get(path, accept)).response.headers.get('x-cache'), 'HIT');
  for (const accept of ['image/webp,*/*', BROWSERS.old, undefined, 'image/png']) await get(path, accept);
  assert.equal((await objects()) - before, 2, 'webp and none: two more objects, whatever else the Accept said');
});

test('a screenshot with transparency: a lossless WebP with its alpha to a WebP browser, a PNG to the rest', async () => {
  const path = ecency(urls.screenshot, 300);
  const webp = await get(path, 'image/webp,*/*');
  assert.equal(webp.info?.format, 'webp');
  const { data, info } = await sharp(webp.body).raw().toBuffer({ resolveWithObject: true });
  assert.equal(info.channels, 4, 'the alpha channel kept');
  assert.equal(data[info.width * 4 * (info.height - 1) + 3], 0, 'a transparent corner stays transparent');
  const avif = await get(path, BROWSERS.chrome);
  assert.equal(avif.info?.format, 'webp', 'a screenshot is lossless WebP for an AVIF browser too');
  assert.equal((await get(path, undefined)).info?.format, 'png');
});

test('an animated GIF under negotiation: an animated WebP of every frame, the same loop and timing; no Accept: a GIF', async () => {
  const source = await sharp(await (await fetch(urls.gif)).arrayBuffer(), { animated: true }).metadata();
  const answer = await get(ecency(urls.gif, 160), BROWSERS.chrome);
  assert.equal(answer.response.status, 200);
  const made = await sharp(answer.body, { animated: true }).metadata();
  assert.deepEqual([made.format, made.pages, made.loop, made.width], ['webp', source.pages, source.loop, 160]);
  assert.deepEqual(made.delay, source.delay);
  assert.equal((await get(ecency(urls.gif, 160), undefined)).info?.format, 'gif');
});

test("an animated GIF at its own size: a lossless animated WebP, every frame the GIF's pixels, fewer bytes; resized: lossy", async () => {
  const gif = Buffer.from(await (await fetch(urls.gif)).arrayBuffer());
  const answer = await get(condenser(urls.gif, '0x0'), BROWSERS.chrome);
  assert.equal(answer.response.status, 200);
  assert.equal(answer.info?.format, 'webp');
  assert.ok(answer.body.length < gif.length, `${answer.body.length} bytes for a ${gif.length}-byte GIF`);
  const frames = async (/** @type {Buffer} */ bytes) => sharp(bytes, { animated: true }).ensureAlpha().raw().toBuffer();
  assert.ok((await frames(answer.body)).equals(await frames(gif)), "every pixel of every frame is the GIF's");
  // resized, the frames are new pixels: lossy, a fraction of the bytes
  const resized = await get(ecency(urls.gif, 160), BROWSERS.chrome);
  assert.ok(resized.body.length < answer.body.length / 4, `${resized.body.length} bytes at half the width`);
});

test("never bigger than the source: a variant of its own size that came out larger is the original's bytes", async () => {
  const original = Buffer.from(await (await fetch(urls.tiny)).arrayBuffer());
  const answer = await get(condenser(urls.tiny, '0x0'), undefined);
  assert.equal(answer.response.status, 200);
  assert.ok(answer.body.equals(original), `${answer.body.length} bytes served for a ${original.length}-byte original`);
});

test('a 600-frame GIF at 0x0 and resized: every frame (an animation is budgeted by its cost, not its length)', async () => {
  for (const [accept, format] of [
    [BROWSERS.chrome, 'webp'],
    [undefined, 'gif'],
  ]) {
    const answer = await get(condenser(urls.long, '0x0'), accept);
    assert.equal(answer.response.status, 200);
    assert.deepEqual([answer.info?.format, answer.info?.width, answer.info?.frames], [format, 48, 600]);
  }
  const resized = await get(ecency(urls.long, 24), BROWSERS.chrome);
  assert.equal(resized.response.status, 200);
  assert.deepEqual([resized.info?.format, resized.info?.width, resized.info?.frames], ['webp', 24, 600]);
});
