// The embedded-profile check (origin/src/icc.js): sRGB profiles as sharp and editors write them (v2 `desc`
// and v4 `mluc`) are sRGB, Display P3 and others are not, and a hostile profile is read in bounded time (#51:
// the `icc` package spent 46 s on a 480-byte profile claiming a billion tags, on the event loop).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import sharp from 'sharp';
import { isSrgbProfile } from '../src/icc.js';

/** The profile sharp embeds for `name` (its built-in sRGB, Display P3, CMYK). @param {string} name */
async function profile(name) {
  const image = sharp({ create: { width: 8, height: 8, channels: 3, background: '#808080' } });
  const jpeg = await image.jpeg().withIccProfile(name).toBuffer();
  return /** @type {Buffer} */ ((await sharp(jpeg).metadata()).icc);
}

test('sRGB is sRGB; Display P3 and CMYK are not; no profile, a cut one or garbage is not', async () => {
  assert.equal(isSrgbProfile(await profile('srgb')), true);
  assert.equal(isSrgbProfile(await profile('p3')), false);
  assert.equal(isSrgbProfile(await profile('cmyk')), false);
  assert.equal(isSrgbProfile(undefined), false);
  const srgb = await profile('srgb');
  assert.equal(isSrgbProfile(srgb.subarray(0, 100)), false);
  assert.equal(isSrgbProfile(Buffer.alloc(600, 0x41)), false);
});

test('a profile claiming four billion tags, or tags past its end, is read at once and is not sRGB', async () => {
  const srgb = await profile('srgb');
  for (const [at, value] of [
    [128, 0xffffffff],
    [128, 0x40000000],
    [136, 0xfffffff0],
    [140, 0xfffffff0],
  ]) {
    const hostile = Buffer.from(srgb);
    hostile.writeUInt32BE(value, at);
    const started = performance.now();
    const answer = isSrgbProfile(hostile);
    assert.ok(performance.now() - started < 50, `${at}: ${performance.now() - started} ms`);
    if (at === 128) assert.equal(answer, false);
  }
});
