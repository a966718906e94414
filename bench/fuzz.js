// The fuzz campaign (#51): seeded mutations of real files of every input format (JPEG, PNG, WebP, GIF, TIFF,
// AVIF, HEIC, each from a real photograph) sent through the real endpoints of one origin: uploaded (POST
// /upload), then served (the original, four /p/ variants of it at once and one as the warmer asks it, with
// kept pixels on), and proxied from a remote host (/p/).
// Expected of every answer: the image, or a 4xx JSON error; never a 5xx, a refused connection or a restart.
// test/fuzz.test.js runs a bounded campaign in the full tier; `./infra/stack bench fuzz` a longer one with a
// report. A case that fails is written to test/fuzz-corpus/ (its format and seed in its name), and every
// file there is replayed by the test from then on.
import '../lib/src/node-version.js';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { startOrigin } from '../origin/test/harness.js';
import { tokenUpload } from '../test/support/upload.js';
import { heifEnc } from '../test/support/heif.js';
import { photo } from '../test/support/images.js';

export const CORPUS = path.join(import.meta.dirname, '..', 'test', 'fuzz-corpus');
export const FORMATS = /** @type {const} */ ([
  'jpeg',
  'png',
  'webp',
  'gif',
  'tiff',
  'avif',
  'heic',
  'anigif',
  'aniwebp',
]);
/** @typedef {typeof FORMATS[number]} Format */
const EXTENSIONS = {
  ...{ jpeg: 'jpg', png: 'png', webp: 'webp', gif: 'gif', tiff: 'tif', avif: 'avif', heic: 'heic' },
  ...{ anigif: 'gif', aniwebp: 'webp' },
};

/** The seed files: one real photograph, small, in every format (with its EXIF, where the format holds it). */
export async function seedFiles() {
  const image = () => sharp(photo('Path', '1280x800')).resize(200).withMetadata({ orientation: 6 });
  /** @type {Record<Format, Buffer>} */
  const files = {
    jpeg: await image().jpeg({ quality: 80 }).toBuffer(),
    png: await image().png().toBuffer(),
    webp: await image().webp().toBuffer(),
    gif: await sharp(photo('Path', '1280x800')).resize(120).gif().toBuffer(),
    tiff: await image().tiff({ compression: 'lzw' }).toBuffer(),
    avif: await image().avif({ effort: 0 }).toBuffer(),
    heic: heifEnc(await sharp(photo('Path', '1280x800')).resize(200).png().toBuffer(), 60),
    anigif: await animation('gif'),
    aniwebp: await animation('webp'),
  };
  return files;
}

/**
 * Three frames panned across the photograph, joined into one animation (its frames, delays and loop count are
 * what a mutation of an animated GIF or WebP reaches that a still one does not). @param {'gif' | 'webp'} format
 */
async function animation(format) {
  const frame = (/** @type {number} */ left) =>
    sharp(photo('Path', '1280x800')).extract({ left, top: 0, width: 800, height: 800 }).resize(96).png().toBuffer();
  const frames = await Promise.all([0, 160, 320].map(frame));
  return sharp(frames, { join: { animated: true } })
    [format]({ loop: 0, delay: 100 })
    .toBuffer();
}

/** The origin's settings in a campaign: kept pixels on, so mutated files reach the kept-pixels paths too. */
export const FUZZ_ORIGIN = { KEPT_PIXELS_BYTES: '64mb' };

/**
 * The variants asked of each uploaded file at once (the bounded box, a WebP, a JPEG, an AVIF: made in a worker).
 * @type {Array<Record<string, string | number>>}
 */
const VARIANTS = [
  { width: 120, height: 90 },
  { width: 100, format: 'webp' },
  { width: 160, format: 'jpeg' },
  { width: 64, format: 'avif' },
];

/** A seeded generator of numbers in [0, 1). @param {number} seed */
function generator(seed) {
  let state = seed >>> 0 || 1;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 4294967296;
  };
}

/**
 * One mutation of `file`, chosen by `seed`: bytes flipped (most in the first 2 KB, where the headers are),
 * cut short, a run copied elsewhere, a run zeroed, or random bytes inserted.
 * @param {Buffer} file @param {number} seed
 */
export function mutate(file, seed) {
  const random = generator(seed);
  const at = (/** @type {number} */ limit = file.length) => Math.floor(random() * limit);
  const kind = Math.floor(random() * 5);
  if (kind === 1) return Buffer.from(file.subarray(0, 8 + at(file.length - 8)));
  if (kind === 4) {
    const where = at();
    const inserted = Buffer.from(Array.from({ length: 1 + at(64) }, () => at(256)));
    return Buffer.concat([file.subarray(0, where), inserted, file.subarray(where)]);
  }
  const bytes = Buffer.from(file);
  if (kind === 0)
    for (let n = 0; n < 1 + at(8); n += 1) bytes[random() < 0.7 ? at(Math.min(2048, bytes.length)) : at()] = at(256);
  if (kind === 2) {
    const from = at();
    bytes.copy(bytes, at(), from, Math.min(bytes.length, from + 1 + at(256)));
  }
  if (kind === 3) {
    const from = at();
    bytes.fill(0, from, Math.min(bytes.length, from + 1 + at(512)));
  }
  return bytes;
}

/** A problem, when an answer is neither the image nor a 4xx JSON error. @param {Response} response @param {Buffer} body */
function problemOf(response, body) {
  if (response.status === 200) return '';
  if (response.status >= 400 && response.status < 500) {
    try {
      return JSON.parse(body.toString()).error?.name ? '' : 'a 4xx without the JSON error shape';
    } catch {
      return 'a 4xx that is not JSON';
    }
  }
  return `status ${response.status}: ${body.toString().slice(0, 200)}`;
}

/**
 * The campaign on a running origin. @param {Awaited<ReturnType<typeof startOrigin>>} origin
 * @param {{ cases: Array<{ name: string, format: string, bytes: Buffer }>, concurrency?: number }} options
 */
export async function runFuzz(origin, { cases, concurrency = 4 }) {
  /** @type {Record<string, number>} */
  const statuses = {};
  /** @type {Array<{ name: string, format: string, bytes: Buffer, problem: string }>} */
  const problems = [];
  let requests = 0;
  /** @param {{ name: string, format: string, bytes: Buffer }} entry @param {string} url @param {RequestInit} [init] */
  const ask = async (entry, url, init) => {
    requests += 1;
    let problem = '';
    /** @type {Response | null} */
    let response = null;
    try {
      response = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
      const body = Buffer.from(await response.arrayBuffer());
      statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      problem = problemOf(response, body);
      if (!problem && response.status === 200 && url.includes('/upload')) return JSON.parse(body.toString()).url;
    } catch (err) {
      problem = `no answer: ${/** @type {Error} */ (err).message}`;
      statuses.none = (statuses.none ?? 0) + 1;
    }
    if (problem) problems.push({ ...entry, problem: `${url.replace(origin.base, '')}: ${problem}` });
    return null;
  };
  const one = async (/** @type {{ name: string, format: string, bytes: Buffer }} */ entry) => {
    const file = `${entry.name}.${EXTENSIONS[/** @type {Format} */ (entry.format)] ?? 'bin'}`;
    const remote = origin.site.add(file, entry.bytes, `image/${entry.format.replace(/^ani/, '')}`);
    await ask(entry, origin.proxied(remote, { width: 100, format: 'webp' }));
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(entry.bytes)]), file);
    const url = await ask(entry, `${origin.base}/upload`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-token' },
      body: form,
    });
    if (url) {
      await ask(entry, url);
      // several sizes and formats of one source at once, as a page asks them: with kept pixels on (FUZZ_ORIGIN)
      // the first decodes and keeps them, the others join that decode or are made from what it kept
      await Promise.all(VARIANTS.map((query) => ask(entry, origin.proxied(url, query))));
      // and as the warmer asks one (a warm worker, which keeps the pixels it decodes); a 429 is its deferral
      await ask(entry, origin.proxied(url, { width: 150, format: 'webp' }), { headers: { 'x-warm': '1' } });
    }
  };
  const queue = [...cases];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let entry = queue.shift(); entry; entry = queue.shift()) await one(entry);
    }),
  );
  return { cases: cases.length, requests, statuses, problems };
}

/** The seeded cases: `perFormat` mutations of each format's seed file, from `seed` on. @param {number} perFormat @param {number} seed */
export async function fuzzCases(perFormat, seed) {
  const files = await seedFiles();
  return FORMATS.flatMap((format) =>
    Array.from({ length: perFormat }, (_, i) => ({
      name: `${format}-${seed + i}`,
      format,
      bytes: mutate(files[format], seed + i + FORMATS.indexOf(format) * 1_000_003),
    })),
  );
}

/** The files that once failed, kept as regression cases (test/fuzz-corpus/<format>-<seed>.<extension>). */
export function corpusCases() {
  if (!fs.existsSync(CORPUS)) return [];
  return fs
    .readdirSync(CORPUS)
    .filter((name) => !name.endsWith('.md'))
    .map((name) => ({
      name: `corpus-${path.parse(name).name}`,
      format: name.split('-')[0],
      bytes: fs.readFileSync(path.join(CORPUS, name)),
    }));
}

/** Keeps the failing cases in the corpus. @param {Array<{ name: string, format: string, bytes: Buffer }>} failed */
export function keepFailures(failed) {
  fs.mkdirSync(CORPUS, { recursive: true });
  for (const entry of failed)
    if (!entry.name.startsWith('corpus-'))
      fs.writeFileSync(
        path.join(CORPUS, `${entry.name}.${EXTENSIONS[/** @type {Format} */ (entry.format)] ?? 'bin'}`),
        entry.bytes,
      );
}

export async function benchFuzz() {
  const perFormat = Number(process.env.FUZZ_CASES_PER_FORMAT) || 200;
  // another seed, other cases: a longer campaign explores past the ones the test command runs (seed 1)
  const seed = Number(process.env.FUZZ_SEED) || 1;
  const origin = await startOrigin(FUZZ_ORIGIN);
  try {
    const pid = origin.pid();
    const started = performance.now();
    const result = await runFuzz(origin, { cases: [...(await fuzzCases(perFormat, seed)), ...corpusCases()] });
    keepFailures(result.problems);
    const restarts = origin.pid() === pid ? 0 : 1;
    return {
      ...result,
      problems: result.problems.map(({ name, problem }) => ({ name, problem })),
      restarts,
      sections: [
        {
          heading: `Fuzz campaign: ${result.cases} mutated files (${perFormat} of each of ${FORMATS.join(', ')}, seed ${seed}) through /p/ and /upload (each upload asked in ${VARIANTS.length + 1} variants, one as the warmer; kept pixels on)`,
          text: `${result.requests} requests in ${Math.round((performance.now() - started) / 1000)} s; origin restarts: ${restarts}; problems (5xx, no answer, a 4xx not JSON): ${result.problems.length}.`,
          table: {
            columns: ['status', 'answers'],
            rows: Object.entries(result.statuses).map(([status, count]) => [status, count]),
          },
        },
      ],
    };
  } finally {
    await origin.stop();
  }
}
