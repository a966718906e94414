import sharp from 'sharp';
import fs from 'node:fs';
sharp.cache(false);
sharp.concurrency(1);
for (const name of ['Path', 'Kite']) {
  const f = fs.readFileSync(`/usr/share/wallpapers/${name}/contents/images/1920x1080.jpg`);
  const time = async (label, fn) => { await fn(); const t = performance.now(); for (let i = 0; i < 10; i++) await fn(); console.log(name, label.padEnd(36), ((performance.now() - t) / 10).toFixed(1), 'ms'); };
  await time('fit 512', () => sharp(f).resize(512, 512, { fit: 'inside' }).raw().toBuffer());
  await time('fit 512 ignoreIcc', () => sharp(f, { ignoreIcc: true }).resize(512, 512, { fit: 'inside' }).raw().toBuffer());
  await time('fit 512 keepIcc', () => sharp(f).resize(512, 512, { fit: 'inside' }).keepIccProfile().raw().toBuffer());
  await time('full ignoreIcc', () => sharp(f, { ignoreIcc: true }).raw().toBuffer());
}
