// One resize per size, not per format (#48): the frontends ask each size of a picture in two or three formats
// (a page's JPEG and WebP, the warmer's AVIF and WebP, every Accept class of its readers), and from kept
// pixels (kept-pixels.js) the resize is most of what is left of a JPEG variant's cost (from the whole
// 2560 × 1600 picture, 4–19 ms each, bench/FINDINGS.md). A variant made from kept pixels leaves its resized
// pixels beside them, under its size (the plan's box and fit); the next variant of that size, in another
// format, is encoded from them: the same pixels, so the same bytes, with neither a decode nor a resize. They
// live and leave with the kept pixels they were made from (their holder counts their bytes: keptBytes), at
// most one and a half times as many bytes as those (RESIZED_SHARE).

/**
 * @typedef {import('./work.js').Work} Work
 * @typedef {import('./work.js').KeptPixels} KeptPixels
 * @typedef {import('./work.js').ResizedPixels} ResizedPixels
 */

/**
 * The bytes of resized pixels kept beside kept pixels, at most, against theirs: the frontends' nine sizes of a
 * 2560 × 1600 photograph (bench/post) hold 1.13 times its pixels.
 */
const RESIZED_SHARE = 1.5;

/**
 * The size a variant's resized pixels are kept under, or null where none are: a placeholder (blurred), an
 * animation, a kernel other than the origin's (bench/kernel). @param {Work} work
 */
function sizeKey({ plan: p, options }) {
  if (p.blur || p.animated || options.kernel) return null;
  return `${p.width ?? ''}x${p.height ?? ''}:${p.fit}`;
}

/** The resized pixels of the work's size kept beside its kept pixels, if any. @param {Work} work */
export function sharedResize(work) {
  const key = sizeKey(work);
  return (key && work.options.kept?.resized?.get(key)) || null;
}

/** The bytes of the resized pixels kept beside `kept`. @param {KeptPixels} kept */
function resizedBytes(kept) {
  let bytes = 0;
  for (const one of kept.resized?.values() ?? []) bytes += one.data.length;
  return bytes;
}

/**
 * Whether the work's resized pixels would be kept (keepResize), before they are made: from kept pixels without
 * alpha (sharp leaves resized ones with alpha premultiplied, and would not take them back as they are), to
 * fewer pixels than those, its size not kept yet. @param {Work} work
 */
export function mayKeepResize(work) {
  const { kept } = work.options;
  const key = sizeKey(work);
  if (!kept || !key || work.sharedResize || kept.resized?.has(key) || kept.channels !== 3) return false;
  return work.plan.pixels < kept.width * kept.height;
}

/**
 * Keeps the work's resized pixels beside its kept pixels for the other formats of its size: only those made
 * from kept pixels by a resize (not already shared, smaller than the kept ones), while all kept beside them
 * stay within RESIZED_SHARE of the kept pixels' bytes. Nothing is copied: the encoders only read them.
 * @param {Work} work @param {{ data: Buffer, info: { width: number, height: number, channels: number } }} raw
 */
export function keepResize(work, raw) {
  const { kept } = work.options;
  const key = sizeKey(work);
  if (!kept || !key || !mayKeepResize(work)) return;
  const { width, height, channels } = raw.info;
  if (width * height >= kept.width * kept.height || channels !== 3) return;
  if (resizedBytes(kept) + raw.data.length > RESIZED_SHARE * kept.data.length) return;
  kept.resized ??= new Map();
  kept.resized.set(key, { data: raw.data, width, height, channels });
}

/**
 * Kept pixels as they cross to another process (a worker's copy, a worker's pixels handed back): without the
 * resized pixels beside them, which would be copied too and are of use only here. @param {KeptPixels} kept
 * @returns {KeptPixels}
 */
export function withoutResized(kept) {
  if (!kept.resized) return kept;
  const { resized, ...pixels } = kept;
  return pixels;
}

/**
 * A holder's kept pixels counted again once variants left resized pixels beside them (an LRUCache sized by
 * `keptBytes`), their time left as it was; past the holder's `maxBytes` the resized ones go, not the pixels.
 * @param {import('lru-cache').LRUCache<string, KeptPixels>} cache @param {string} key @param {KeptPixels} pixels
 * @param {number} maxBytes
 */
export function countAgain(cache, key, pixels, maxBytes) {
  if (!pixels.resized || cache.peek(key)?.data !== pixels.data) return;
  if (keptBytes(pixels) > maxBytes) pixels.resized.clear();
  // the cache counts an entry's size only when it is given another value: the same pixels, and the same
  // resized ones, in a new object (a variant under way holds the old one, whose pixels are these)
  cache.set(key, { ...pixels }, { noUpdateTTL: true });
}

/** The bytes kept pixels hold, with the resized pixels beside them. @param {KeptPixels} kept */
export const keptBytes = (kept) => kept.data.length + resizedBytes(kept);
