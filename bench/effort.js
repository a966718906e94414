// bench/effort: what each encoder effort costs and gives, on the real photographs, with the origin's own
// transform (decode → rotate → 512×512 fit → encode): CPU ms per variant (one libvips thread, process CPU
// time over the encodes ÷ variants), mean KB and mean SSIM against the unencoded resize; and the same for
// JPEG's quantisation table (mozjpeg's table 3 or libjpeg's standard one), scans and quality. The defaults of
// AVIF_EFFORT, WEBP_EFFORT and JPEG_PROGRESSIVE, and the JPEG tables, are set from it (README, Encoding).
//   node bench/effort.js [--quick] [--jpeg]   (--jpeg: the JPEG table alone, report bench/reports/<date>-effort-jpeg)
import '../lib/src/node-version.js';
import fs from 'node:fs';
import sharp from 'sharp';
import { loadConfig } from '@stack/lib';
import { machine, spread, writeReport } from './lib.js';
import { settings as originSettings } from '../origin/src/config.js';
import { ONE_THREAD, compareInTurn, photoFiles } from './quality.js';

const QUICK = process.argv.includes('--quick');
const ONLY_JPEG = process.argv.includes('--jpeg');
const EFFORTS = {
  webp: QUICK ? [0, 4, 6] : [0, 1, 2, 3, 4, 5, 6],
  avif: QUICK ? [0, 3, 4] : [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
};
/** The origin's defaults (WEBP_EFFORT, AVIF_EFFORT): every effort's CPU is compared with theirs, in turn. */
const ORIGIN_DEFAULTS = loadConfig(originSettings, {});
const DEFAULT_EFFORT = { webp: ORIGIN_DEFAULTS.WEBP_EFFORT, avif: ORIGIN_DEFAULTS.AVIF_EFFORT };
const REPEATS = QUICK ? 1 : 3;
/** JPEG: mozjpeg's table 3 progressive q80 (the default until 2026-11-25) first, as the reference; the standard tables; baseline and progressive. */
const isOldJpegDefault = (/** @type {{ table: number, progressive: boolean, quality: number }} */ s) =>
  s.table === 3 && s.progressive && s.quality === 80;
const JPEG_ALL = [3, 0].flatMap((table) =>
  [true, false].flatMap((progressive) =>
    (QUICK ? [80] : [76, 78, 80, 82]).map((quality) => ({ table, progressive, quality })),
  ),
);
const JPEG_SETTINGS = [...JPEG_ALL.filter(isOldJpegDefault), ...JPEG_ALL.filter((s) => !isOldJpegDefault(s))];
const JPEG_ROUNDS = QUICK ? 2 : 9;

/**
 * Every effort of a format, run in turn with the origin's default effort first (its CPU is the reference of
 * each round), listed by effort. @param {'webp' | 'avif'} format @param {string[]} files
 */
async function efforts(format, files) {
  const list = [DEFAULT_EFFORT[format], ...EFFORTS[format].filter((effort) => effort !== DEFAULT_EFFORT[format])];
  const compared = await compareInTurn(
    files,
    format,
    list.map((effort) => ({ ...ONE_THREAD, [`${format}Effort`]: effort })),
    REPEATS,
  );
  return list.map((effort, i) => ({ format, effort, ...compared[i] })).sort((a, b) => a.effort - b.effort);
}

/** What every effort shares: decode, rotate and resize to raw pixels. @param {string[]} files */
async function baseline(files) {
  /** @type {number[]} */
  const cpuMs = [];
  for (let run = 0; run < REPEATS; run += 1) {
    const before = process.cpuUsage();
    for (const file of files)
      await sharp(file, { sequentialRead: true }).rotate().resize(512, 512, { fit: 'inside' }).raw().toBuffer();
    const used = process.cpuUsage(before);
    cpuMs.push((used.user + used.system) / 1000 / files.length);
  }
  return spread(cpuMs);
}

/**
 * Every effort of WebP and AVIF, and what they share (decoding and resizing). @param {string[]} files
 * @returns {Promise<{ rows: any[], shared: ReturnType<typeof spread>, section: any }>}
 */
async function effortTable(files) {
  const shared = await baseline(files);
  process.stderr.write(`decode + resize: ${shared.median.toFixed(1)} CPU ms\n`);
  const rows = [];
  for (const format of /** @type {const} */ (['webp', 'avif'])) {
    for (const result of await efforts(format, files)) {
      process.stderr.write(
        `${format} effort ${result.effort}: ${result.cpuMs.median.toFixed(1)} CPU ms (${result.ratio.median.toFixed(3)} of effort ${DEFAULT_EFFORT[format]}), ${result.kb.toFixed(1)} KB, SSIM ${result.ssim.toFixed(4)}\n`,
      );
      rows.push(result);
    }
  }
  return {
    rows,
    shared,
    section: {
      heading:
        'Encoder effort: CPU ms per variant, bytes and SSIM (512×512 fit of six 2560×1600 photographs; WebP q80, AVIF q50; one libvips thread)',
      text: `CPU ms: process CPU time over the six transforms ÷ 6. A format's efforts run in turn, ${REPEATS} rounds, each round every effort once, the origin's default (WebP ${DEFAULT_EFFORT.webp}, AVIF ${DEFAULT_EFFORT.avif}) first: this VM's speed moves within minutes, so the ratio to the default in the same round (min / median / max over the rounds) is the figure to read. The encode alone is the median less what every effort shares, decoding and resizing to raw pixels, measured before (${shared.min.toFixed(1)} / ${shared.median.toFixed(1)} / ${shared.max.toFixed(1)} ms). SSIM against the photograph decoded whole and resized to the variant's size, unencoded (bench/quality.js).`,
      table: {
        columns: [
          'format',
          'effort',
          'CPU ms per variant (median)',
          'CPU against the default effort',
          'of which the encode (median)',
          'mean KB',
          'mean SSIM',
        ],
        rows: rows.map((row) => [
          row.format,
          row.effort,
          row.cpuMs.median.toFixed(1),
          `${row.ratio.min.toFixed(2)} / ${row.ratio.median.toFixed(2)} / ${row.ratio.max.toFixed(2)}`,
          Math.max(0, row.cpuMs.median - shared.median).toFixed(1),
          row.kb.toFixed(1),
          row.ssim.toFixed(4),
        ]),
      },
    },
  };
}

/** JPEG's tables, scans and qualities, in turn against the old default. @param {string[]} files */
async function jpegTable(files) {
  const settings = JPEG_SETTINGS.map(({ table, progressive, quality }) => ({
    ...ONE_THREAD,
    jpegTable: table,
    jpegProgressive: progressive,
    jpegQuality: quality,
  }));
  const compared = await compareInTurn(files, 'jpeg', settings, JPEG_ROUNDS);
  const rows = JPEG_SETTINGS.map((setting, i) => ({ ...setting, ...compared[i] }));
  for (const row of rows)
    process.stderr.write(
      `jpeg table ${row.table} ${row.progressive ? 'progressive' : 'baseline'} q${row.quality}: ${row.cpuMs.median.toFixed(1)} CPU ms (${row.ratio.median.toFixed(3)}), ${row.kb.toFixed(2)} KB, SSIM ${row.ssim.toFixed(4)}\n`,
    );
  return {
    rows,
    section: {
      heading:
        'JPEG: quantisation table, scans and quality (same photographs; optimised Huffman tables, no trellis; one libvips thread)',
      text: `Table 3 is mozjpeg's (ImageMagick's), table 0 libjpeg's standard one (Annex K, what libjpeg-turbo and Pillow use). Compare rows at equal KB for the SSIM a table keeps per byte. CPU: the settings run in turn, ${JPEG_ROUNDS} rounds, each round every setting once over the six photographs (this VM's speed moves within minutes, so only the ratio to the first row in the same round is worth reading, min / median / max over the rounds).`,
      table: {
        columns: [
          'table',
          'scans',
          'quality',
          'CPU ms per variant (median)',
          'CPU against the first row',
          'mean KB',
          'mean SSIM',
        ],
        rows: rows.map((row) => [
          row.table,
          row.progressive ? 'progressive' : 'baseline',
          row.quality,
          row.cpuMs.median.toFixed(1),
          `${row.ratio.min.toFixed(3)} / ${row.ratio.median.toFixed(3)} / ${row.ratio.max.toFixed(3)}`,
          row.kb.toFixed(2),
          row.ssim.toFixed(4),
        ]),
      },
    },
  };
}

export async function benchEffort() {
  sharp.cache(false);
  sharp.concurrency(1);
  const files = photoFiles();
  const effort = ONLY_JPEG ? null : await effortTable(files);
  const jpeg = await jpegTable(files);
  return {
    rows: effort?.rows ?? [],
    jpeg: jpeg.rows,
    shared: effort?.shared ?? null,
    sections: [...(effort ? [effort.section] : []), jpeg.section],
  };
}

if (import.meta.main) {
  const result = await benchEffort();
  const file = writeReport(ONLY_JPEG ? 'effort-jpeg' : 'effort', {
    title: 'bench/effort',
    command: `node bench/effort.js${QUICK ? ' --quick' : ''}${ONLY_JPEG ? ' --jpeg' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
