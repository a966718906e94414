// The bad-input corpus, generated (never committed): every class of broken, hostile or unusual image an
// origin meets. Each case says what a correct answer is: an image of a known size, or a 4xx JSON error.
import zlib from 'node:zlib';
import sharp from 'sharp';
import { animated, oriented, pngBomb, solid } from '../test/support/images.js';

/**
 * @typedef {{ name: string, class: string, body: Buffer, type: string, expect: 'image' | 'error' | 'either', upload?: 'error',
 *   width?: number, height?: number }} Case  `upload`: what an upload of it must get, where that differs from serving it
 */

/** Deterministic bit flips in the body past the header. @param {Buffer} data @param {number} seed */
function flip(data, seed) {
  const out = Buffer.from(data);
  let state = seed;
  for (let i = 0; i < 24; i += 1) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    const at = 64 + (state % Math.max(1, out.length - 64));
    out[at] ^= 1 << (state % 8);
  }
  return out;
}

/** A GIF whose logical screen claims 65535×65535 with one 1×1 frame. */
function gifBomb() {
  const header = Buffer.from('GIF89a');
  const screen = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00]);
  const image = Buffer.from([0x2c, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b]);
  return Buffer.concat([header, screen, image]);
}

/** @returns {Promise<Case[]>} */
export async function buildCorpus() {
  const jpeg = await solid(320, 240, 'jpeg');
  const png = await solid(320, 240, 'png');
  const webp = await solid(320, 240, 'webp');
  const gif = await animated(64, 48, 3, 'gif');
  /** @type {Case[]} */
  const cases = [];
  const add = (/** @type {Case} */ entry) => cases.push(entry);
  for (const [format, data, type] of /** @type {Array<[string, Buffer, string]>} */ ([
    ['jpeg', jpeg, 'image/jpeg'],
    ['png', png, 'image/png'],
    ['webp', webp, 'image/webp'],
    ['gif', gif, 'image/gif'],
  ])) {
    for (const fraction of [0.1, 0.5, 0.9])
      add({
        name: `truncated-${format}-${fraction}`,
        class: 'truncated',
        body: data.subarray(0, Math.floor(data.length * fraction)),
        type,
        expect: 'error',
      });
    for (const seed of [1, 2, 3])
      add({ name: `flipped-${format}-${seed}`, class: 'bit-flipped', body: flip(data, seed), type, expect: 'either' });
  }
  add({ name: 'zero-bytes', class: 'empty', body: Buffer.alloc(0), type: 'image/jpeg', expect: 'error' });
  add({
    name: 'html',
    class: 'not-an-image',
    body: Buffer.from('<!doctype html><title>x</title><script>alert(1)</script>'),
    type: 'image/png',
    expect: 'error',
  });
  add({
    name: 'text',
    class: 'not-an-image',
    body: Buffer.from('just some text, not pixels'),
    type: 'image/jpeg',
    expect: 'error',
  });
  add({
    name: 'gif-html-polyglot',
    class: 'polyglot',
    body: Buffer.concat([Buffer.from('GIF89a/*'), Buffer.from('*/=1;<script>alert(1)</script>')]),
    type: 'image/gif',
    expect: 'error',
  });
  add({
    name: 'jpeg-zip-polyglot',
    class: 'polyglot',
    body: Buffer.concat([jpeg, zlib.deflateRawSync(Buffer.from('PK\x03\x04 payload'))]),
    type: 'image/jpeg',
    expect: 'image',
    width: 320,
    height: 240,
  });
  add({
    name: 'cmyk-jpeg',
    class: 'colour',
    body: await sharp({ create: { width: 200, height: 100, channels: 3, background: '#3366cc' } })
      .toColourspace('cmyk')
      .jpeg()
      .toBuffer(),
    type: 'image/jpeg',
    expect: 'image',
    width: 200,
    height: 100,
  });
  add({
    name: '16-bit-png',
    class: 'colour',
    body: await sharp({ create: { width: 120, height: 90, channels: 3, background: '#884422' } })
      .toColourspace('rgb16')
      .png()
      .toBuffer(),
    type: 'image/png',
    expect: 'image',
    width: 120,
    height: 90,
  });
  add({
    name: 'png-50000x50000',
    class: 'dimension-bomb',
    body: await pngBomb(50000, 50000),
    type: 'image/png',
    expect: 'error',
  });
  add({
    name: 'png-100000x1',
    class: 'dimension-bomb',
    body: await pngBomb(100000, 1000),
    type: 'image/png',
    expect: 'error',
  });
  add({ name: 'gif-65535', class: 'dimension-bomb', body: gifBomb(), type: 'image/gif', expect: 'error' });
  // served and uploaded: an animation is budgeted by what it costs (#49: 1,000 frames of 8 × 8 cost about a
  // megapixel with their overhead), never refused for its length
  add({
    name: 'gif-1000-frames',
    class: 'frame-bomb',
    body: await animated(8, 8, 1000, 'gif'),
    type: 'image/gif',
    expect: 'image',
    width: 8,
    height: 8,
  });
  const xxe =
    '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&x;</text></svg>';
  add({ name: 'svg-xxe', class: 'svg', body: Buffer.from(xxe), type: 'image/svg+xml', expect: 'error' });
  add({
    name: 'svg-script',
    class: 'svg',
    body: Buffer.from(
      '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script><image href="http://169.254.169.254/"/></svg>',
    ),
    type: 'image/svg+xml',
    expect: 'error',
  });
  for (let orientation = 1; orientation <= 8; orientation += 1) {
    add({
      name: `exif-orientation-${orientation}`,
      class: 'exif-orientation',
      body: await oriented(300, 200, orientation),
      type: 'image/jpeg',
      expect: 'image',
      width: orientation >= 5 ? 200 : 300,
      height: orientation >= 5 ? 300 : 200,
    });
  }
  return cases;
}
