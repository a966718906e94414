// temporary: resize kernel cost and quality (not committed)
import sharp from 'sharp';
import ssimModule from 'ssim.js';
import { photo } from '../test/support/images.js';
const { ssim } = /** @type {any} */ (ssimModule);
sharp.concurrency(1); sharp.cache(false);
const PHOTOS = ['Path', 'Autumn', 'ColdRipple', 'BytheWater', 'Kite', 'FallenLeaf'];
const files = PHOTOS.map((name) => photo(name, '1920x1080'));
const KERNELS = ['lanczos3', 'lanczos2', 'mitchell', 'cubic', 'linear'];
/** fair reference: full decode, no shrink-on-load, lanczos3 from the raw pixels */
const refs = [];
for (const file of files) {
  const full = await sharp(file).rotate().removeAlpha().raw().toBuffer({ resolveWithObject: true });
  refs.push(full);
}
async function sim(i, out) {
  const d = await sharp(out).removeAlpha().ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const { width, height } = d.info;
  const r = await sharp(refs[i].data, { raw: refs[i].info }).resize(width, height, { fit: 'fill', kernel: 'lanczos3' }).ensureAlpha().raw().toBuffer();
  return ssim({ data: new Uint8ClampedArray(r), width, height }, { data: new Uint8ClampedArray(d.data), width, height }).mssim;
}
const fmt = process.argv[2] || 'jpeg';
for (const q of (process.argv[3] || '80').split(',').map(Number)) for (const kernel of KERNELS) {
  const cpu = [];
  let outs = [];
  for (let run = 0; run < 5; run++) {
    const b = process.cpuUsage(); outs = [];
    for (const file of files) {
      let im = sharp(file, { sequentialRead: true }).rotate().resize({ width: 512, height: 512, fit: 'inside', kernel });
      im = fmt === 'jpeg' ? im.jpeg({ quality: q, progressive: true, optimiseCoding: true, quantisationTable: 3 }) : im.webp({ quality: q, effort: 4 });
      outs.push(await im.toBuffer());
    }
    const u = process.cpuUsage(b); cpu.push((u.user + u.system) / 1000 / files.length);
  }
  cpu.sort((a, b) => a - b);
  let s = 0; for (const [i, o] of outs.entries()) s += await sim(i, o);
  const kb = outs.reduce((a, o) => a + o.length, 0) / outs.length / 1024;
  console.log(fmt, 'q' + q, kernel.padEnd(9), 'cpu ms min/med', cpu[0].toFixed(1), cpu[2].toFixed(1), 'KB', kb.toFixed(2), 'SSIM', (s / files.length).toFixed(4));
}
