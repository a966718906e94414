// A HEIC decoded for a smaller variant the fast way: its HEVC pictures by libavcodec (avcodec.js), a grid's
// tiles put together, each of the Y, Cb and Cr planes shrunk by sharp by a power of two, and only then turned
// into RGB: at 1/8 of a 12-megapixel photograph that is 190,000 pixels to convert instead of 12 million, which
// is most of what libheif spends besides decoding. The conversion is libheif's (its matrices and ranges), the
// file's rotation and mirroring become the EXIF orientation the orient step applies. Null where container.js
// or avcodec.js does not take the file: libheif decodes it then.
import sharp from 'sharp';
import { HttpError } from '@stack/lib/src/errors.js';
import { hevcDecoder } from './avcodec.js';
import { heifLayout } from './container.js';

/**
 * @typedef {import('./container.js').HeifLayout} HeifLayout
 * @typedef {{ rgb: Buffer, width: number, height: number, orientation: number, icc: Buffer | null }} ShrunkHeic
 *   rgb: interleaved 8-bit RGB rows, width × height, before `orientation` is applied
 */

/** Kr and Kb of the matrices libheif converts (ITU-T H.273's MatrixCoefficients); 2 is unspecified. */
const KR_KB = /** @type {Record<number, [number, number]>} */ ({
  1: [0.2126, 0.0722],
  2: [0.299, 0.114],
  4: [0.3, 0.11],
  5: [0.299, 0.114],
  6: [0.299, 0.114],
  7: [0.212, 0.087],
  9: [0.2627, 0.0593],
  10: [0.2627, 0.0593],
});

/**
 * From this plane shrink on, HEVC's deblocking filter is skipped: it smooths the edges of 8-pixel blocks,
 * which a box shrink by 8 averages into single pixels anyway (2 % of the decode's CPU).
 */
const UNFILTERED_FROM = 8;

/** The power of two (up to 32) a plane may be shrunk by for a variant `shrink` times smaller. @param {number} shrink */
export function planeShrink(shrink) {
  let factor = 1;
  while (factor < 32 && factor * 2 <= shrink) factor *= 2;
  return factor;
}

/**
 * The primary image of `file`, shrunk by `factor` (a power of two), as RGB; null where libheif must do it.
 * @param {Buffer} file @param {{ factor: number, maxPixels: number }} options @returns {Promise<ShrunkHeic | null>}
 */
export async function decodeShrunk(file, { factor, maxPixels }) {
  const decoder = hevcDecoder();
  const layout = decoder && heifLayout(file);
  if (!decoder || !layout) return null;
  const [kr, kb] = KR_KB[layout.nclx?.matrix ?? 2] ?? [];
  const orientation = orientationOf(layout.transforms);
  if (!kr || !orientation) return null;
  if (layout.width * layout.height > maxPixels)
    throw new HttpError(400, 'image_too_large', {
      width: layout.width,
      height: layout.height,
      limit_pixels: maxPixels,
    });
  const width = Math.max(1, Math.ceil(layout.width / factor));
  const height = Math.max(1, Math.ceil(layout.height / factor));
  let planes;
  try {
    const [tile] = layout.tiles;
    // the coded size may be up to a coding block (at most 64) past the declared one each way
    const options = { filters: factor < UNFILTERED_FROM, maxPixels: (tile.width + 64) * (tile.height + 64) };
    planes = await shrunkPlanes(decoder, layout, width, height, options);
  } catch {
    return null; // what FFmpeg refuses, libheif judges (and answers the client's 400)
  }
  const rgb = toRgb(planes, { kr, kb, fullRange: layout.nclx?.fullRange ?? true });
  return { rgb, width, height, orientation, icc: layout.icc };
}

/**
 * Y, Cb and Cr at width × height: a single picture shrunk straight from the decoder's frame, a grid put
 * together first. @param {import('./avcodec.js').HevcDecoder} decoder @param {HeifLayout} layout
 * @param {number} width @param {number} height @param {{ filters: boolean, maxPixels: number }} options @returns {Promise<Buffer[]>}
 */
async function shrunkPlanes(decoder, layout, width, height, options) {
  const sizes = planeSizes(layout.width, layout.height);
  /** @type {Buffer[]} */
  let shrunk = [];
  if (layout.tiles.length === 1) {
    await decoder.each(
      [layout.tiles[0].data],
      async (frame) => {
        if (frame.width !== layout.width || frame.height !== layout.height) throw new Error('picture size');
        shrunk = await Promise.all(frame.planes.map((plane, i) => shrinkPlane(plane, sizes[i], width, height)));
      },
      options,
    );
    return shrunk;
  }
  const whole = sizes.map(([w, h]) => Buffer.alloc(w * h));
  const [tile] = layout.tiles;
  await decoder.each(
    layout.tiles.map((t) => t.data),
    (frame, index) => {
      if (frame.width !== tile.width || frame.height !== tile.height) throw new Error('tile size');
      const left = (index % layout.columns) * tile.width;
      const top = Math.floor(index / layout.columns) * tile.height;
      const tileSizes = planeSizes(tile.width, tile.height);
      frame.planes.forEach((plane, i) =>
        paste(plane, tileSizes[i][0], whole[i], sizes[i], i ? [left / 2, top / 2] : [left, top]),
      );
    },
    options,
  );
  return Promise.all(whole.map((data, i) => shrinkPlane({ data, stride: sizes[i][0] }, sizes[i], width, height)));
}

/** Y's size and the chroma planes' (half each way, rounded up). @param {number} width @param {number} height */
const planeSizes = (width, height) => {
  const chroma = /** @type {[number, number]} */ ([(width + 1) >> 1, (height + 1) >> 1]);
  return [/** @type {[number, number]} */ ([width, height]), chroma, chroma];
};

/**
 * A tile's plane (`planeWidth` of each `stride`) into the whole plane at [left, top], cut at its right and
 * bottom edges. @param {{ data: Uint8Array, stride: number }} plane @param {number} planeWidth @param {Buffer} whole
 * @param {[number, number]} size the whole plane's @param {[number, number]} at
 */
function paste(plane, planeWidth, whole, [width, height], [left, top]) {
  const columns = Math.min(planeWidth, width - left);
  const rows = Math.min(plane.data.length / plane.stride, height - top);
  for (let y = 0; y < rows && columns > 0; y += 1)
    whole.set(plane.data.subarray(y * plane.stride, y * plane.stride + columns), (top + y) * width + left);
}

/**
 * One plane resized to width × height by sharp (a box shrink, then lanczos3 for the rest).
 * @param {{ data: Uint8Array, stride: number }} plane @param {[number, number]} size @param {number} width @param {number} height
 */
function shrinkPlane(plane, [planeWidth, planeHeight], width, height) {
  let image = sharp(plane.data, { raw: { width: plane.stride, height: planeHeight, channels: 1 } });
  if (plane.stride !== planeWidth) image = image.extract({ left: 0, top: 0, width: planeWidth, height: planeHeight });
  // one channel out: sharp's raw output is sRGB otherwise
  return image.resize(width, height, { fit: 'fill' }).toColourspace('b-w').raw().toBuffer();
}

/**
 * YCbCr to RGB as libheif does it (heif_colorconversion.cc): limited range expanded, then the matrix of Kr, Kb;
 * through tables of each sample's share (16.16 fixed point), as libjpeg does. Within one level of libheif's
 * floating point. @param {Buffer[]} planes @param {{ kr: number, kb: number, fullRange: boolean }} colour
 */
export function toRgb([y, cb, cr], { kr, kb, fullRange }) {
  const [yScale, yOffset, cScale] = fullRange ? [1, 0, 1] : [1.1689, 16, 1.1429];
  const fixed = (/** @type {(value: number) => number} */ share) =>
    Int32Array.from({ length: 256 }, (_, value) => Math.round(share(value) * 65536));
  const luma = fixed((value) => (value - yOffset) * yScale + 0.5);
  const rCr = fixed((value) => 2 * (1 - kr) * (value - 128) * cScale);
  const gCb = fixed((value) => ((2 * kb * (1 - kb)) / (kb + kr - 1)) * (value - 128) * cScale);
  const gCr = fixed((value) => ((2 * kr * (1 - kr)) / (kb + kr - 1)) * (value - 128) * cScale);
  const bCb = fixed((value) => 2 * (1 - kb) * (value - 128) * cScale);
  const rgb = Buffer.allocUnsafe(y.length * 3);
  for (let i = 0, o = 0; i < y.length; i += 1, o += 3) {
    const l = luma[y[i]];
    const u = cb[i];
    const v = cr[i];
    rgb[o] = clamp((l + rCr[v]) >> 16);
    rgb[o + 1] = clamp((l + gCb[u] + gCr[v]) >> 16);
    rgb[o + 2] = clamp((l + bCb[u]) >> 16);
  }
  return rgb;
}

/** @param {number} value */
const clamp = (value) => (value < 0 ? 0 : value > 255 ? 255 : value);

/** EXIF orientations (1-8) as 2×2 matrices on (x right, y down): what the viewer does to the stored pixels. */
const ORIENTATIONS = /** @type {Array<[number, number[]]>} */ ([
  [1, [1, 0, 0, 1]],
  [2, [-1, 0, 0, 1]],
  [3, [-1, 0, 0, -1]],
  [4, [1, 0, 0, -1]],
  [5, [0, 1, 1, 0]],
  [6, [0, -1, 1, 0]],
  [7, [0, -1, -1, 0]],
  [8, [0, 1, -1, 0]],
]);

/** @param {number[]} a @param {number[]} b a·b, b applied first */
const times = ([a, b, c, d], [e, f, g, h]) => [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h];

/**
 * HEIF's irot (anticlockwise quarter turns) and imir (axis 0: top and bottom swapped, 1: left and right, as
 * the amended standard, Apple and libheif have it) in the order listed, as one EXIF orientation. @param {import('./container.js').Transform[]} transforms
 */
export function orientationOf(transforms) {
  let matrix = [1, 0, 0, 1];
  for (const t of transforms) {
    if (t.kind === 'mirror') matrix = times(t.axis === 0 ? [1, 0, 0, -1] : [-1, 0, 0, 1], matrix);
    else for (let q = 0; q < t.quarters; q += 1) matrix = times([0, 1, -1, 0], matrix);
  }
  return ORIENTATIONS.find(([, m]) => m.every((value, i) => value === matrix[i]))?.[0] ?? 0;
}
