// SSIM of an image against its source, the one measure of "as close to the source" the tests and the
// benchmarks share (bench/quality, bench/post, origin/test/kept-pixels).
import sharp from 'sharp';
import ssimModule from 'ssim.js';

const { ssim } = /** @type {any} */ (ssimModule);

/**
 * Mean SSIM of `variant` against `file` resized to the variant's size with lanczos3 from every decoded pixel:
 * no shrink-on-load (sharp from the file would take a JPEG's DCT scale, as the origin does, and favour it),
 * so the reference is no server's pipeline. `fit`: how a box of another shape is filled (cover: cropped
 * centred, as the origin's cover; fill: stretched).
 * @param {string} file @param {Buffer} variant @param {'cover' | 'fill'} [fit]
 */
export async function ssimToSource(file, variant, fit = 'cover') {
  const decoded = await sharp(variant).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const { width, height } = decoded.info;
  const full = await sharp(file).rotate().raw().toBuffer({ resolveWithObject: true });
  const reference = await sharp(full.data, { raw: full.info })
    .resize(width, height, { fit, kernel: 'lanczos3' })
    .ensureAlpha()
    .raw()
    .toBuffer();
  return ssim(
    { data: new Uint8ClampedArray(reference), width, height },
    { data: new Uint8ClampedArray(decoded.data), width, height },
  ).mssim;
}
