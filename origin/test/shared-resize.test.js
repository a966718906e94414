// pipeline/shared-resize.js: which resized pixels stay beside kept pixels for the other formats of their size,
// within what bytes, and what a holder counts. (Made and used by real variants: kept-pixels.test.js.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LRUCache } from 'lru-cache';
import {
  countAgain,
  keepResize,
  keptBytes,
  mayKeepResize,
  sharedResize,
  withoutResized,
} from '../src/pipeline/shared-resize.js';

/** @typedef {import('../src/pipeline/work.js').KeptPixels} KeptPixels */

/** Kept pixels of a 1000 × 500 picture, 3 or 4 channels. @param {3 | 4} [channels] @returns {KeptPixels} */
const keptOf = (channels = 3) => ({
  data: new Uint8Array(1000 * 500 * channels),
  width: 1000,
  height: 500,
  channels,
  decodedBy: 'kept',
});

/**
 * The work of a variant `width` wide (fit inside) from `kept`. @param {KeptPixels} kept
 * @param {number} width @param {{ blur?: boolean }} [more]
 */
function workOf(kept, width, { blur = false } = {}) {
  const height = Math.round(width / 2);
  return /** @type {any} */ ({
    plan: { width, height: undefined, fit: 'inside', blur, animated: false, pixels: width * height },
    options: { kept },
    sharedResize: false,
  });
}

/** Its resized pixels as sharp hands them over. @param {number} width */
const rawOf = (width) => {
  const height = Math.round(width / 2);
  return { data: Buffer.alloc(width * height * 3), info: { width, height, channels: 3 } };
};

test('a resize from kept pixels stays for the next format of its size, once; a placeholder, a full size and alpha do not', () => {
  const kept = keptOf();
  keepResize(workOf(kept, 400), rawOf(400));
  const next = workOf(kept, 400);
  assert.equal(sharedResize(next)?.width, 400, 'the next format of the size finds them');
  assert.equal(mayKeepResize(next), false, 'kept once');
  assert.equal(sharedResize(workOf(kept, 401)), null, 'another size does not');
  keepResize(workOf(kept, 20, { blur: true }), rawOf(20));
  keepResize(workOf(kept, 1000), rawOf(1000));
  assert.equal(kept.resized?.size, 1, 'neither the blurred placeholder nor the full size');
  const alpha = keptOf(4);
  assert.equal(mayKeepResize(workOf(alpha, 400)), false, 'sharp leaves resized pixels with alpha premultiplied');
});

test('resized pixels beside kept ones stay within one and a half times their bytes; a holder counts them and lets them go first', () => {
  const kept = keptOf();
  // 1.5 MB kept, so 2.25 MB beside them: 990 wide (1.47 MB) and 700 (735 KB) fit, 400 (240 KB) would pass it
  for (const width of [990, 700, 400]) keepResize(workOf(kept, width), rawOf(width));
  assert.deepEqual(
    [...(kept.resized?.values() ?? [])].map((one) => one.width),
    [990, 700],
  );
  assert.equal(keptBytes(kept), 1_500_000 + 1_470_150 + 735_000);
  /** @type {LRUCache<string, KeptPixels>} */
  const cache = new LRUCache({ maxSize: 10_000_000, sizeCalculation: keptBytes });
  cache.set('a', withoutResized(kept));
  const held = /** @type {KeptPixels} */ (cache.get('a'));
  assert.equal('resized' in held, false, 'what crosses to another process leaves them');
  keepResize(workOf(held, 700), rawOf(700));
  countAgain(cache, 'a', held, 10_000_000);
  assert.equal(cache.calculatedSize, 1_500_000 + 735_000, 'counted with them');
  keepResize(workOf(held, 500), rawOf(500));
  countAgain(cache, 'a', held, 2_000_000);
  assert.equal(cache.get('a')?.data, held.data, 'past the holder: the pixels stay');
  assert.equal(cache.calculatedSize, 1_500_000, 'and the resized ones go');
});
