// bench/codecs: the system's libjpeg-turbo encoding the origin's JPEG variants (codecs.js) against sharp's own
// mozjpeg build encoding the same pixels, in process on one libvips thread, in turns (each round runs both, so
// a slow minute of the machine weighs on both alike): bench/origin's 512 × 512 variant of the six photographs,
// and the frontends' set of JPEG variants (#48: nine sizes) of the twelve 2560 × 1600 photographs of bench/post.
// Both ways decode with libjpeg-turbo and resize with sharp; only the encoder differs, and every output is
// checked to be the same bytes.
//   node bench/codecs.js [--quick]
import '../lib/src/node-version.js';
import sharp from 'sharp';
import { loadSystemCodecs, sharpJpegOptions } from '../origin/src/codecs.js';
import { plan, probe, transform } from '../origin/src/pipeline/index.js';
import { FRONTEND_SET } from '../test/support/frontend-set.js';
import { photo } from '../test/support/images.js';
import { machine, spreadText, writeReport } from './lib.js';
import { POST_PHOTOS } from './post.js';
import { ONE_THREAD, compareInTurn, photoFiles } from './quality.js';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 1 : 5;

sharp.cache(false);
sharp.concurrency(1);
const codecs = loadSystemCodecs('on');
const jpegDecoder = /** @type {import('../origin/src/codecs.js').JpegCodec} */ (codecs.jpeg);
/** The two ways, in this order in every round: sharp encodes, then libjpeg-turbo. */
const WAYS = [
  {
    name: "sharp's mozjpeg",
    options: { ...ONE_THREAD, codecs: { ...codecs, jpeg: { ...jpegDecoder, agrees: false } } },
  },
  { name: 'libjpeg-turbo', options: { ...ONE_THREAD, codecs } },
];

/** The frontends' JPEG set of every photograph, planned once. */
async function setPlans() {
  const names = POST_PHOTOS.slice(0, quick ? 3 : POST_PHOTOS.length);
  return Promise.all(
    names.map(async (name) => {
      const file = photo(name, '2560x1600');
      const info = await probe(file, { maxPixels: ONE_THREAD.maxPixels, maxFrames: 1 });
      const plans = FRONTEND_SET.map((query) =>
        plan(
          info,
          {
            width: Number(query.width) || null,
            height: Number(query.height) || null,
            mode: query.mode === 'fit' ? 'fit' : 'cover',
            format: 'jpeg',
            accept: '',
          },
          false,
        ),
      );
      return { file, plans };
    }),
  );
}

/**
 * Each way in turn, `ROUNDS` rounds: a set's CPU ms (its nine variants) per photograph, each round's mean.
 * @param {Awaited<ReturnType<typeof setPlans>>} sources
 */
async function setInTurn(sources) {
  /** @type {number[][]} */
  const cpu = WAYS.map(() => []);
  /** @type {Buffer[][]} */
  const outputs = WAYS.map(() => []);
  for (let round = 0; round <= ROUNDS; round += 1) {
    for (const [i, way] of WAYS.entries()) {
      const made = [];
      const before = process.cpuUsage();
      for (const { file, plans } of sources)
        for (const p of plans) made.push((await transform(file, p, way.options)).data);
      const used = process.cpuUsage(before);
      // round 0 is the warm-up, and what is compared byte for byte
      if (round === 0) outputs[i] = made;
      else cpu[i].push((used.user + used.system) / 1000 / sources.length);
    }
  }
  const same = outputs[1].filter((output, j) => output.equals(outputs[0][j])).length;
  return { cpu, same, of: outputs[0].length };
}

/** The widths whose encode alone is compared (the frontends' smallest, condenser's and its 2x). */
const ENCODE_WIDTHS = [320, 768, 1536];

/**
 * The encode alone, each way in turn: the same raw pixels (a photograph resized to each of ENCODE_WIDTHS) to a
 * JPEG by sharp from raw pixels and by libjpeg-turbo. CPU ms an encode, per width: each round's mean over the
 * photographs. @param {Awaited<ReturnType<typeof setPlans>>} sources
 */
async function encodeInTurn(sources) {
  /** @type {Record<number, { sharp: number[], turbo: number[] }>} */
  const byWidth = {};
  const { jpegQuality: quality, jpegProgressive: progressive } = ONE_THREAD;
  for (const width of ENCODE_WIDTHS) {
    const pixels = await Promise.all(
      sources.map(({ file }) => sharp(file).resize({ width }).raw().toBuffer({ resolveWithObject: true })),
    );
    const timed = async (/** @type {(raw: (typeof pixels)[number]) => Promise<unknown>} */ encode) => {
      const before = process.cpuUsage();
      for (const raw of pixels) await encode(raw);
      const used = process.cpuUsage(before);
      return (used.user + used.system) / 1000 / pixels.length;
    };
    byWidth[width] = { sharp: [], turbo: [] };
    for (let round = 0; round <= ROUNDS; round += 1) {
      const bySharp = await timed((raw) =>
        sharp(raw.data, { raw: raw.info }).jpeg(sharpJpegOptions({ quality, progressive })).toBuffer(),
      );
      const byTurbo = await timed((raw) => jpegDecoder.encode(raw, { quality, progressive }, codecs.buffers));
      if (round === 0) continue; // the warm-up
      byWidth[width].sharp.push(bySharp);
      byWidth[width].turbo.push(byTurbo);
    }
  }
  return byWidth;
}

export async function benchCodecs() {
  const fit = await compareInTurn(
    photoFiles(),
    'jpeg',
    WAYS.map((way) => way.options),
    ROUNDS,
  );
  const sources = await setPlans();
  const set = await setInTurn(sources);
  const ratios = set.cpu[1].map((ms, round) => ms / set.cpu[0][round]);
  const encodes = await encodeInTurn(sources);
  return {
    fit,
    set: { cpuMs: set.cpu, same: set.same, of: set.of },
    encodes,
    sections: [
      {
        heading: `The encode alone: the same raw pixels (each of the ${sources.length} photographs resized to the width) to a JPEG (q${ONE_THREAD.jpegQuality}, baseline), ${ROUNDS} rounds in turn, CPU ms an encode, min / median / max`,
        table: {
          columns: ['width', "sharp's mozjpeg", 'libjpeg-turbo', '× sharp in the same round'],
          rows: ENCODE_WIDTHS.map((width) => {
            const { sharp: bySharp, turbo } = encodes[width];
            return [
              width,
              spreadText(bySharp),
              spreadText(turbo),
              spreadText(turbo.map((ms, round) => ms / bySharp[round])),
            ];
          }),
        },
      },
      {
        heading: `A 512 × 512 JPEG variant (q${ONE_THREAD.jpegQuality}, baseline) of the six photographs, one libvips thread, ${ROUNDS} rounds in turn, min / median / max`,
        table: {
          columns: ['encoder', 'CPU ms a variant', '× sharp in the same round', 'mean KB', 'mean SSIM'],
          rows: WAYS.map((way, i) => [
            way.name,
            `${fit[i].cpuMs.min.toFixed(2)} / ${fit[i].cpuMs.median.toFixed(2)} / ${fit[i].cpuMs.max.toFixed(2)}`,
            `${fit[i].ratio.min.toFixed(3)} / ${fit[i].ratio.median.toFixed(3)} / ${fit[i].ratio.max.toFixed(3)}`,
            fit[i].kb,
            fit[i].ssim.toFixed(4),
          ]),
        },
      },
      {
        heading: `The frontends' JPEG set (${FRONTEND_SET.length} variants, 256 to 1536 px) of ${sources.length} 2560 × 1600 photographs: CPU ms a set, ${ROUNDS} rounds in turn, min / median / max`,
        table: {
          columns: ['encoder', 'CPU ms a set', '× sharp in the same round', 'the same bytes as sharp'],
          rows: WAYS.map((way, i) => [
            way.name,
            spreadText(set.cpu[i]),
            i === 0 ? '1' : spreadText(ratios),
            i === 0 ? '' : `${set.same} of ${set.of}`,
          ]),
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchCodecs();
  const file = writeReport('codecs', {
    title: "bench/codecs: the system's libjpeg-turbo encoding JPEG variants, against sharp's mozjpeg",
    command: `node bench/codecs.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: { fit: result.fit, set: result.set, encodes: result.encodes },
  });
  process.stdout.write(`${file}\n`);
}
