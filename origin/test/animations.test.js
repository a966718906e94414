// #49: animations are budgeted by what they cost (every frame's pixels and its overhead: pipeline/source.js
// animationCost), not by a count: a 600-frame GIF, which images.hive.blog takes, uploads and is served with
// every frame, at its size and resized; one too costly to transform answers its original at its size, saying
// why, from the result cache too, and a resize of it is its first frames.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { decode } from '../../test/support/images.js';
import { startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let strict;
let long = Buffer.alloc(0);
before(async () => {
  [origin, strict] = await Promise.all([startOrigin(), startOrigin({ MAX_FRAMES: '200' })]);
  long = await movingGif(96, 54, 600);
});
after(async () => {
  await origin?.stop();
  await strict?.stop();
});

const CHROME = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

/** A GIF of `frames` frames, a bar moving across a gradient: every frame differs. @param {number} width @param {number} height @param {number} frames */
async function movingGif(width, height, frames) {
  const pixels = Buffer.alloc(width * height * frames * 3);
  for (let f = 0; f < frames; f += 1)
    for (let y = 0; y < height; y += 1)
      for (let x = 0; x < width; x += 1) {
        const at = ((f * height + y) * width + x) * 3;
        const bar = Math.abs(x - (f % width)) < 4;
        pixels[at] = bar ? 255 : x;
        pixels[at + 1] = bar ? 255 : y * 2;
        pixels[at + 2] = bar ? 0 : (f * 3) & 255;
      }
  return sharp(pixels, { raw: { width, height: height * frames, channels: 3, pageHeight: height } })
    .gif({ delay: Array(frames).fill(40), loop: 0 })
    .toBuffer();
}

/** Uploads `body` to `to` and answers its URL. @param {typeof origin} to @param {Buffer} body */
async function uploaded(to, body) {
  const response = await tokenUpload(to.base, body, 'long.gif');
  assert.equal(response.status, 200, await response.clone().text());
  return /** @type {{ url: string }} */ (await response.json()).url;
}

/** @param {string} url @param {string} [accept] */
async function get(url, accept) {
  const response = await fetch(url, { headers: accept ? { accept } : {} });
  const body = Buffer.from(await response.arrayBuffer());
  assert.equal(response.status, 200, body.toString().slice(0, 200));
  return { response, body, image: await decode(body) };
}

test('a 600-frame GIF uploads, and is served with all 600 frames: at its size (a GIF, or an animated WebP) and resized', async () => {
  const url = await uploaded(origin, long);
  const own = await get(origin.proxied(url, { format: 'match', mode: 'fit' }));
  assert.deepEqual([own.image.format, own.image.width, own.image.frames], ['gif', 96, 600]);
  const webp = await get(origin.proxied(url, { format: 'match', mode: 'fit' }), CHROME);
  assert.deepEqual([webp.image.format, webp.image.width, webp.image.frames], ['webp', 96, 600]);
  const resized = await get(origin.proxied(url, { width: 48, format: 'match', mode: 'fit' }), CHROME);
  assert.deepEqual([resized.image.format, resized.image.width, resized.image.frames], ['webp', 48, 600]);
  for (const answer of [own, webp, resized]) assert.equal(answer.response.headers.get('x-served-original'), null);
});

test('past the budget (MAX_FRAMES 200): the upload is taken; at its size the original, saying why, also from the cache; resized its first 200 frames', async () => {
  const url = await uploaded(strict, long);
  for (const accept of [CHROME, undefined, CHROME]) {
    const own = await get(strict.proxied(url, { format: 'match', mode: 'fit' }), accept);
    assert.ok(own.body.equals(long), "the original's bytes");
    assert.equal(own.response.headers.get('x-served-original'), 'animation_past_budget');
  }
  const resized = await get(strict.proxied(url, { width: 48 }), CHROME);
  assert.deepEqual([resized.image.format, resized.image.width, resized.image.frames], ['webp', 48, 200]);
  assert.equal(resized.response.headers.get('x-served-original'), null);
});
