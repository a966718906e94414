// Fewer bytes for every frontend (#40): a "page" of 30 images of the mix a Hive feed has (20 photographs,
// 7 screenshots with text, 3 animated GIFs), asked with the URLs condenser (/768x0/ → format=match, width 768)
// and ecency (format=match, width 640) build, with Chrome's, Safari's and Firefox's Accept, from an origin
// with NEGOTIATE_MATCH off (before: the source's formats) and one with it on (after: what each browser gets
// once the AVIFs are made). Bytes, mean SSIM against the source resized unencoded, and the origin's CPU for
// the page. Target: Chrome's page at least 25 % fewer bytes at equal or better SSIM. `node bench/page.js`
import '../lib/src/node-version.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { startOrigin } from '../origin/test/harness.js';
import { photo } from '../test/support/images.js';
import { cpuMs, machine, writeReport } from './lib.js';
import { PHOTOS, meanSsim } from './quality.js';

const BROWSERS = {
  chrome: 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8',
  safari:
    'image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5',
  firefox: 'image/avif,image/webp,*/*',
};

/** The page's sources, written into `dir`: [file, name] each. @param {string} dir */
async function sources(dir) {
  /** @type {Array<[string, string]>} */
  const files = [];
  const write = (/** @type {string} */ name, /** @type {Buffer} */ bytes) => {
    fs.writeFileSync(path.join(dir, name), bytes);
    files.push([path.join(dir, name), name]);
  };
  for (let i = 0; i < 20; i += 1) {
    const width = [1920, 1600, 1280, 2400][i % 4];
    write(
      `photo-${i}.jpg`,
      await sharp(photo(PHOTOS[i % PHOTOS.length], '1920x1080'))
        .resize(width)
        .jpeg({ quality: [88, 92, 85, 95][i % 4] })
        .toBuffer(),
    );
  }
  for (let i = 0; i < 7; i += 1) {
    const text = Array.from(
      { length: 18 },
      (_, line) =>
        `<text x="24" y="${60 + line * 24}" font-family="sans-serif" font-size="16" fill="#222">${i}.${line}: a screenshot of settings, a chart, code and menus — 0123456789</text>`,
    ).join('');
    write(
      `screenshot-${i}.png`,
      await sharp(
        Buffer.from(
          `<svg xmlns="http://www.w3.org/2000/svg" width="1100" height="520"><rect width="1100" height="520" fill="${['#ffffff', '#f4f4f4', '#1e1e1e'][i % 3]}"/><rect width="1100" height="36" fill="#2b5797"/>${text}</svg>`,
        ),
      )
        .png()
        .toBuffer(),
    );
  }
  for (let i = 0; i < 3; i += 1) {
    const frames = await Promise.all(
      Array.from({ length: 16 }, (_, f) =>
        sharp(photo(PHOTOS[(i + f) % PHOTOS.length], '1920x1080'))
          .resize(480, 270)
          .png()
          .toBuffer(),
      ),
    );
    write(
      `anim-${i}.gif`,
      await sharp(frames, { join: { animated: true } })
        .gif({ loop: 0, delay: Array(16).fill(100) })
        .toBuffer(),
    );
  }
  return files;
}

/**
 * The page from `origin` as `accept` gets it: its answers (in page order), bytes, CPU.
 * @param {Awaited<ReturnType<typeof startOrigin>>} origin @param {string[]} urls @param {string} accept
 */
async function page(origin, urls, accept) {
  const pid = origin.pid();
  const before = cpuMs([pid]);
  /** @type {Buffer[]} */
  const answers = [];
  for (const [i, url] of urls.entries()) {
    const query = i % 2 ? { format: 'match', mode: 'fit', width: 768 } : { format: 'match', mode: 'fit', width: 640 };
    const response = await fetch(origin.proxied(url, query), { headers: { accept } });
    if (response.status !== 200) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    answers.push(Buffer.from(await response.arrayBuffer()));
  }
  return { answers, bytes: answers.reduce((sum, answer) => sum + answer.length, 0), cpuMs: cpuMs([pid]) - before };
}

/**
 * Bytes and mean SSIM before and after for each kind of image on the page (by its file name).
 * @param {Array<[string, string]>} files @param {Buffer[]} old @param {Buffer[]} now
 */
async function byClass(files, old, now) {
  const rows = [];
  for (const [kind, prefix] of [
    ['photograph', 'photo-'],
    ['screenshot', 'screenshot-'],
    ['animation', 'anim-'],
  ]) {
    const at = files.flatMap(([, name], i) => (name.startsWith(prefix) ? [i] : []));
    const paths = at.map((i) => files[i][0]);
    const kb = (/** @type {Buffer[]} */ answers) =>
      Math.round(at.reduce((sum, i) => sum + answers[i].length, 0) / 1024);
    rows.push([
      kind,
      at.length,
      kb(old),
      kb(now),
      (
        await meanSsim(
          paths,
          at.map((i) => old[i]),
        )
      ).toFixed(4),
      (
        await meanSsim(
          paths,
          at.map((i) => now[i]),
        )
      ).toFixed(4),
    ]);
  }
  return rows;
}

export async function benchPage() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-page-'));
  const [before, after] = await Promise.all([
    startOrigin({ NEGOTIATE_MATCH: 'false' }),
    startOrigin({ AUTO_AVIF_FIRST_ANSWER: 'false' }),
  ]);
  try {
    const files = await sources(dir);
    const urls = {
      before: files.map(([file, name]) => before.site.add(name, fs.readFileSync(file))),
      after: files.map(([file, name]) => after.site.add(name, fs.readFileSync(file))),
    };
    const rows = [];
    /** @type {any[][]} */
    const classRows = [];
    const results = {};
    for (const [browser, accept] of Object.entries(BROWSERS)) {
      const old = await page(before, urls.before, accept);
      const now = await page(after, urls.after, accept);
      if (browser === 'chrome') classRows.push(...(await byClass(files, old.answers, now.answers)));
      const formats = [
        ...new Set(await Promise.all(now.answers.map(async (answer) => (await sharp(answer).metadata()).format))),
      ].join(', ');
      const [ssimBefore, ssimAfter] = await Promise.all([
        meanSsim(
          files.map(([file]) => file),
          old.answers,
        ),
        meanSsim(
          files.map(([file]) => file),
          now.answers,
        ),
      ]);
      const saving = 1 - now.bytes / old.bytes;
      results[browser] = {
        bytesBefore: old.bytes,
        bytesAfter: now.bytes,
        saving,
        ssimBefore,
        ssimAfter,
        cpuBefore: old.cpuMs,
        cpuAfter: now.cpuMs,
        formats,
      };
      rows.push([
        browser,
        Math.round(old.bytes / 1024),
        Math.round(now.bytes / 1024),
        `${(saving * 100).toFixed(1)} %`,
        ssimBefore.toFixed(4),
        ssimAfter.toFixed(4),
        Math.round(old.cpuMs),
        Math.round(now.cpuMs),
        formats,
      ]);
    }
    return {
      ...results,
      sections: [
        {
          heading:
            "A page of 30 images (20 photographs, 7 screenshots, 3 animated GIFs) at condenser's 768 and ecency's 640 px, format=match: before (the source's formats) and after negotiation, each browser (target: Chrome at least 25 % fewer bytes at equal or better SSIM)",
          table: {
            columns: [
              'browser',
              'KB before',
              'KB after',
              'fewer bytes',
              'mean SSIM before',
              'mean SSIM after',
              'origin CPU ms before',
              'origin CPU ms after',
              'formats after',
            ],
            rows,
          },
        },
        {
          heading:
            "Chrome's page by kind of image (SSIM against the source decoded and resized unencoded: an animation at its own size is compared with the GIF's own pixels)",
          table: {
            columns: ['kind', 'images', 'KB before', 'KB after', 'mean SSIM before', 'mean SSIM after'],
            rows: classRows,
          },
        },
      ],
    };
  } finally {
    await Promise.all([before.stop(), after.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const result = await benchPage();
  const file = writeReport('page', {
    title: 'bench/page',
    command: 'node bench/page.js',
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
