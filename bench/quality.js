// What a variant looks like against its source: the mean SSIM the quality tables of bench/peers, bench/effort
// and bench/kernel report.
import sharp from 'sharp';
import ssimModule from 'ssim.js';

const { ssim } = /** @type {any} */ (ssimModule);

/**
 * Mean SSIM of encoded outputs against each source resized to the output's size, unencoded. The reference is
 * resized with lanczos3 from the fully decoded pixels (no shrink-on-load), so it is no server's pipeline:
 * resized straight from the file it was our origin's own decode and reduce, and only another server's
 * resampling (or another kernel) counted against it. @param {string[]} files @param {Buffer[]} outputs
 */
export async function meanSsim(files, outputs) {
  let sum = 0;
  for (const [i, file] of files.entries()) {
    const decoded = await sharp(outputs[i]).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    const { width, height } = decoded.info;
    const full = await sharp(file).rotate().raw().toBuffer({ resolveWithObject: true });
    const reference = await sharp(full.data, { raw: full.info }).resize(width, height, { fit: 'fill', kernel: 'lanczos3' }).ensureAlpha().raw().toBuffer();
    sum += ssim({ data: new Uint8ClampedArray(reference), width, height }, { data: new Uint8ClampedArray(decoded.data), width, height }).mssim;
  }
  return sum / files.length;
}
