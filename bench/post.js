// bench/post (#48): what the frontends' set of variants of one photograph costs the origin. For each of 12
// photographs (2560 × 1600 JPEGs), the set a post's readers ask (condenser's 768 and its 2x 1536 wide, its feed
// boxes 256 × 512 and 640 × 480; ecency's srcset 320, 600, 800, 1024 and 1280 wide, fit), in JPEG (no Accept)
// and WebP (Accept: image/webp): 18 variants, asked one after another as a page load does, then as the warmer
// does (X-Warm: 1), then the AVIF set (Accept: image/avif, format=avif: encoded in workers). Origins side by
// side in the same run: before, a decode per variant (KEPT_PIXELS_BYTES=0, WARM_KEPT_PIXELS=false); after,
// kept pixels on (KEPT_PIXELS_BYTES=128mb) for a page load and the AVIF set, and the defaults for the warmer's
// (KEPT_PIXELS_BYTES=0: its warm worker keeps them, WARM_KEPT_PIXELS). Each variant's CPU is the origin's
// process CPU and its workers' across its request. Reported:
// a set's CPU against its single most expensive variant (the target: at most 3×), before and after; the floor
// under it (the set's encodes alone against that variant, in process: encodeFloor); every variant's bytes and
// SSIM against the source, before and after.
//   node bench/post.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import sharp from 'sharp';
import { loadSystemCodecs } from '../origin/src/codecs.js';
import { plan, probe, transform, transformToPixels } from '../origin/src/pipeline/index.js';
import { parseWant } from '../origin/src/options.js';
import { startOrigin } from '../origin/test/harness.js';
import { FRONTEND_SET as SET } from '../test/support/frontend-set.js';
import { photo } from '../test/support/images.js';
import { ssimToSource } from '../test/support/ssim.js';
import { machine, percentile, processTreeCpuMs, spreadText, writeReport } from './lib.js';
import { ONE_THREAD } from './quality.js';

const quick = process.argv.includes('--quick');
/** The twelve photographs of bench/post (bench/codecs makes their JPEG sets too). */
export const POST_PHOTOS = [
  'Autumn',
  'BytheWater',
  'ColdRipple',
  'ColorfulCups',
  'DarkestHour',
  'EveningGlow',
  'FallenLeaf',
  'Grey',
  'Kite',
  'OneStandsOut',
  'Path',
  'summer_1am',
];
const NAMES = POST_PHOTOS.slice(0, quick ? 3 : 12);
const RUNS = quick ? 1 : 3;
const CLASSES = [
  { name: 'JPEG', accept: '' },
  { name: 'WebP', accept: 'image/webp,*/*' },
];

/**
 * One variant asked, its CPU and bytes. @param {Awaited<ReturnType<typeof startOrigin>>} origin @param {string} url
 * @param {Record<string, string | number>} query @param {Record<string, string>} headers
 */
async function ask(origin, url, query, headers) {
  const before = processTreeCpuMs(origin.pid());
  const response = await fetch(origin.proxied(url, query), { headers });
  const body = Buffer.from(await response.arrayBuffer());
  if (response.status !== 200) throw new Error(`${JSON.stringify(query)}: ${response.status} ${body}`);
  // the workers' CPU is read after they answered; a kept worker's time is read live
  return { cpu: processTreeCpuMs(origin.pid()) - before, body };
}

/**
 * A set asked of one source on one origin. @param {Awaited<ReturnType<typeof startOrigin>>} origin
 * @param {string} url @param {'reader' | 'warmer' | 'avif'} how
 */
async function askSet(origin, url, how) {
  const answers = [];
  if (how === 'avif') {
    for (const query of SET) answers.push(await ask(origin, url, { ...query, format: 'avif' }, {}));
    return answers;
  }
  for (const { accept } of CLASSES)
    for (const query of SET)
      answers.push(
        await ask(origin, url, query, {
          ...(accept ? { accept } : {}),
          ...(how === 'warmer' ? { 'x-warm': '1' } : {}),
        }),
      );
  return answers;
}

/** The system codecs of encodeFloor, loaded once. @type {import('../origin/src/codecs.js').SystemCodecs | null} */
let codecs = null;

/**
 * The floor no sharing can go under (#48): the set's 18 encodes alone, each from its variant's pixels already
 * decoded and resized, against the set's most expensive variant made alone from the file, in this process on one
 * libvips thread with the origin's codecs and encoder defaults. CPU ms, the median of `repeats` of each.
 * @param {string} file @param {number} repeats
 */
async function encodeFloor(file, repeats) {
  sharp.concurrency(1);
  codecs ??= loadSystemCodecs('on');
  const options = { ...ONE_THREAD, codecs };
  const info = await probe(file, { maxPixels: options.maxPixels, maxFrames: 1 });
  const config = { MAX_DIMENSION: 4096, NEGOTIATE_MATCH: true };
  const median = async (/** @type {() => Promise<unknown>} */ work) => {
    const times = [];
    for (let i = 0; i < repeats; i += 1) {
      const before = process.cpuUsage();
      await work();
      const used = process.cpuUsage(before);
      times.push((used.user + used.system) / 1000);
    }
    return percentile(
      times.sort((a, b) => a - b),
      0.5,
    );
  };
  let encodes = 0;
  let most = 0;
  for (const { accept } of CLASSES) {
    for (const query of SET) {
      const asked = Object.fromEntries(Object.entries(query).map(([name, value]) => [name, String(value)]));
      const p = plan(info, parseWant(asked, accept, config), false);
      most = Math.max(most, await median(() => transform(file, p, options)));
      const { data, width, height, channels } = await transformToPixels(file, p, options);
      const raw = { data: Buffer.from(data), info: { width, height, channels } };
      const { jpeg, webp, buffers } = codecs;
      encodes += await median(() =>
        p.format === 'webp'
          ? /** @type {import('../origin/src/codecs.js').WebpEncoder} */ (webp).encode(
              raw,
              options.webpQuality,
              options.webpEffort,
            )
          : /** @type {import('../origin/src/codecs.js').JpegCodec} */ (jpeg).encode(
              raw,
              { quality: options.jpegQuality, progressive: options.jpegProgressive },
              buffers,
            ),
      );
    }
  }
  return { encodes, most, ratio: encodes / most };
}

export async function benchPost() {
  const settings = { LOG_LEVEL: 'warn', WARM_MAX_CPU_PRESSURE: '0' };
  const [kept, defaults, decodeEach] = await Promise.all([
    startOrigin({ ...settings, KEPT_PIXELS_BYTES: '128mb' }),
    startOrigin(settings),
    startOrigin({ ...settings, KEPT_PIXELS_BYTES: '0', WARM_KEPT_PIXELS: 'false' }),
  ]);
  /** @type {Record<string, { after: number[], before: number[], afterMax: number[], beforeMax: number[] }>} */
  const ratios = {};
  /** @type {Array<{ how: string, before: number, after: number }>} */
  const sets = [];
  const quality = {
    bytesBefore: 0,
    bytesAfter: 0,
    ssimBefore: 0,
    ssimAfter: 0,
    worst: Infinity,
    worstOf: '',
    count: 0,
  };
  try {
    for (let run = 0; run < RUNS; run += 1) {
      for (const name of NAMES) {
        const file = photo(name, '2560x1600');
        const bytes = fs.readFileSync(file);
        for (const how of /** @type {const} */ (['reader', 'warmer', 'avif'])) {
          // a new source each time (nothing cached), the same bytes on both origins, asked in turn
          const key = `${name}-${run}-${how}.jpg`;
          const at = how === 'warmer' ? defaults : kept;
          const after = await askSet(at, at.site.add(key, bytes), how);
          const before = await askSet(decodeEach, decodeEach.site.add(key, bytes), how);
          const sum = (/** @type {Array<{ cpu: number }>} */ list) => list.reduce((total, one) => total + one.cpu, 0);
          const most = Math.max(...before.map((one) => one.cpu));
          ratios[how] ??= { after: [], before: [], afterMax: [], beforeMax: [] };
          ratios[how].after.push(sum(after) / most);
          ratios[how].before.push(sum(before) / most);
          sets.push({ how, before: sum(before), after: sum(after) });
          if (run === 0 && how !== 'warmer') {
            for (const [i, one] of after.entries()) {
              const [a, b] = [await ssimToSource(file, one.body), await ssimToSource(file, before[i].body)];
              quality.ssimAfter += a;
              quality.ssimBefore += b;
              if (a - b < quality.worst) {
                quality.worst = a - b;
                const query = how === 'avif' ? SET[i] : SET[i % SET.length];
                quality.worstOf = `${name} ${how === 'avif' ? 'AVIF' : CLASSES[Math.floor(i / SET.length)].name} ${JSON.stringify(query)}`;
              }
              quality.bytesAfter += one.body.length;
              quality.bytesBefore += before[i].body.length;
              quality.count += 1;
            }
          }
        }
      }
    }
  } finally {
    await kept.stop();
    await defaults.stop();
    await decodeEach.stop();
  }
  /** @type {Array<{ name: string, encodes: number, most: number, ratio: number }>} */
  const floors = [];
  for (const name of NAMES) floors.push({ name, ...(await encodeFloor(photo(name, '2560x1600'), quick ? 1 : 3)) });
  const rows = Object.entries(ratios).map(([how, r]) => {
    const cpu = sets.filter((set) => set.how === how);
    return [
      how === 'avif'
        ? 'the AVIF set (9 variants)'
        : `as ${how === 'reader' ? 'a page load' : 'the warmer (after: the defaults)'} (18 variants)`,
      spreadText(cpu.map((set) => set.before)),
      spreadText(cpu.map((set) => set.after)),
      spreadText(r.before),
      spreadText(r.after),
    ];
  });
  const n = quality.count;
  const floorOf = (/** @type {'encodes' | 'most' | 'ratio'} */ field) =>
    spreadText(floors.map((floor) => floor[field]));
  return {
    ratios,
    sets,
    quality,
    floors,
    sections: [
      {
        heading: `The frontends' set of variants of one 2560 × 1600 photograph: CPU of the set, before (a decode per variant) and after (kept pixels); ${NAMES.length} photographs × ${RUNS} runs, min / median / max`,
        table: {
          columns: [
            'set',
            'CPU ms before',
            'CPU ms after',
            '× the most expensive variant, before',
            '× after (target ≤ 3)',
          ],
          rows,
        },
      },
      {
        heading: `The floor: the set's 18 encodes alone (from pixels already decoded and resized) against its most expensive variant made alone from the file, in process, one libvips thread, the origin's encoders and defaults; ${NAMES.length} photographs, min / median / max`,
        table: {
          columns: ['CPU ms of the 18 encodes', 'CPU ms of the most expensive variant', '× (no sharing goes under it)'],
          rows: [[floorOf('encodes'), floorOf('most'), floorOf('ratio')]],
        },
      },
      {
        heading: 'Every variant of the first run (JPEG, WebP and AVIF sets) against the source',
        table: {
          columns: [
            'variants',
            'mean KB before',
            'mean KB after',
            'mean SSIM before',
            'mean SSIM after',
            'worst SSIM change',
            'of',
          ],
          rows: [
            [
              n,
              quality.bytesBefore / n / 1024,
              quality.bytesAfter / n / 1024,
              (quality.ssimBefore / n).toFixed(4),
              (quality.ssimAfter / n).toFixed(4),
              quality.worst.toFixed(4),
              quality.worstOf,
            ],
          ],
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchPost();
  const file = writeReport('post', {
    title: "bench/post: one decode per picture (the frontends' set of variants)",
    command: `node bench/post.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: { ratios: result.ratios, sets: result.sets, quality: result.quality, floors: result.floors },
  });
  process.stdout.write(`${file}\n`);
}
