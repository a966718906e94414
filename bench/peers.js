// bench/peers: our origin against thumbor (the fastest open-source peer measured on this machine) on the
// same work in the same run, alternating: uncached variants of real photographs, 512×512 fit, JPEG q80 and
// WebP q80, at concurrency 2/4/8; then what each sends for that work: bytes and SSIM against an unencoded
// reference, and thumbor's SSIM once its quality is lowered until its files are as small as ours.
//   node bench/peers.js [--quick]
// Thumbor is installed from PyPI into bench/.peers/ (not committed) the first time.
import '../lib/src/node-version.js';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { startOrigin } from '../origin/test/harness.js';
import { freePort, waitFor } from '../test/support/ports.js';
import { cpuMs, machine, round, sampleRss, spread, wrkAsync, writeReport } from './lib.js';
import { BLOCK, SCRIPT, SECONDS, uncachedRun } from './origin.js';
import { meanSsim, photoFiles } from './quality.js';

const quick = process.argv.includes('--quick');
const THUMBOR_VERSION = '7.8.0';
const PEERS = path.join(import.meta.dirname, '.peers');
const REPEATS = quick ? 1 : 3;
// the whole comparison this many times in a row, each pass's ratio reported apart (the hour moves them)
const PASSES = quick ? 1 : Number(process.env.BENCH_PEERS_PASSES || 3);
const CONCURRENCIES = [2, 4, 8];
const FORMATS = /** @type {const} */ (['jpeg', 'webp']);

export async function benchPeers() {
  const thumborBin = installThumbor();
  const files = photoFiles();
  // one single-process thumbor per core, each on its own port, the load spread evenly over them: thumbor's
  // own --processes shares one listening socket, and a handful of keepalive connections often all land on
  // one process (half the machine idle); this is how its documentation deploys it behind nginx
  const thumbor = await startThumbors(thumborBin, files, os.availableParallelism());
  const origin = await startOrigin({ LOG_LEVEL: 'warn', TRANSFORM_QUEUE_MAX: '128' });
  try {
    const sources = files.map((file, i) => origin.site.add(`photo-${i}.jpg`, fs.readFileSync(file)));
    // our originals are fetched once (the store keeps them); thumbor reads them from local files
    for (const source of sources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
    const encoded = sources.map((source) => base58Url.encode(source));
    let first = 0;
    const originRss = sampleRss(origin.pid());
    /** @type {Array<{ started: string, runs: any[] }>} */
    const passes = [];
    for (let pass = 0; pass < PASSES; pass += 1) {
      const started = new Date().toISOString();
      const runs = [];
      for (const format of FORMATS) {
        for (const concurrency of CONCURRENCIES) {
          const entry = { format, concurrency, origin: /** @type {any[]} */ ([]), thumbor: /** @type {any[]} */ ([]) };
          for (let repeat = 0; repeat < REPEATS; repeat += 1) {
            let cpu = cpuMs([origin.pid()]);
            const ours = await uncachedRun(origin, originRss, { format, concurrency, first, encoded });
            // every variant's CPU, those wrk left behind included (uncachedRun waits for them)
            entry.origin.push({ ...ours, cpu_ms_per_variant: (cpuMs([origin.pid()]) - cpu) / ours.transforms });
            const thumborRss = thumbor.pids.map((pid) => sampleRss(pid));
            cpu = cpuMs(thumbor.pids);
            const theirs = await thumborRun(thumbor.bases, { format, concurrency, first }, files.length);
            // ÷ the answers wrk counted: the few it left behind make this up to 2 % high
            entry.thumbor.push({
              ...theirs,
              peak_rss_mb: thumborRss.reduce((sum, rss) => sum + rss.stop(), 0),
              cpu_ms_per_variant: (cpuMs(thumbor.pids) - cpu) / theirs.requests,
            });
            first += BLOCK;
          }
          runs.push(entry);
        }
      }
      passes.push({ started, runs });
      process.stderr.write(`peers pass ${pass + 1}: ${JSON.stringify(bestOf(runs))}\n`);
    }
    const quality = await compareOutput(files, sources, origin, thumbor.bases[0]);
    return summarise(passes, quality);
  } finally {
    await origin.stop();
    thumbor.stop();
  }
}

/** Thumbor in its own virtualenv under bench/.peers, installed once. @returns {string} the thumbor command */
function installThumbor() {
  const venv = path.join(PEERS, `thumbor-${THUMBOR_VERSION}`);
  const bin = path.join(venv, 'bin', 'thumbor');
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(PEERS, { recursive: true });
  const run = (/** @type {string} */ command, /** @type {string[]} */ args) =>
    spawnSync(command, args, { stdio: 'inherit' }).status === 0;
  if (!run('python3', ['-m', 'venv', venv])) {
    // Debian splits venv out of python3
    if (
      !run('apt-get', ['install', '-y', '--no-install-recommends', 'python3-venv']) ||
      !run('python3', ['-m', 'venv', venv])
    )
      throw new Error('cannot make a Python virtualenv: apt-get install python3-venv');
  }
  if (!run(path.join(venv, 'bin', 'pip'), ['install', '--quiet', `thumbor==${THUMBOR_VERSION}`]))
    throw new Error(`pip install thumbor==${THUMBOR_VERSION} failed`);
  return bin;
}

/**
 * Thumbor configured for the same work as the origin: local files (no fetch), no storage or result storage
 * (every variant made anew), JPEG q80 progressive (its default), WebP q80, EXIF orientation applied; `count` instances.
 * @param {string} bin @param {string[]} files @param {number} count
 */
async function startThumbors(bin, files, count) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'thumbor-'));
  fs.mkdirSync(path.join(dir, 'images'));
  files.forEach((file, i) => fs.copyFileSync(file, path.join(dir, 'images', `photo-${i}.jpg`)));
  fs.writeFileSync(
    path.join(dir, 'thumbor.conf'),
    [
      "LOADER = 'thumbor.loaders.file_loader'",
      `FILE_LOADER_ROOT_PATH = '${path.join(dir, 'images')}'`,
      "STORAGE = 'thumbor.storages.no_storage'",
      'RESULT_STORAGE = None',
      'QUALITY = 80',
      'WEBP_QUALITY = 80',
      'PROGRESSIVE_JPEG = True',
      'RESPECT_ORIENTATION = True',
      'ALLOW_UNSAFE_URL = True',
      '',
    ].join('\n'),
  );
  const children = [];
  const bases = [];
  for (let i = 0; i < count; i += 1) {
    const port = await freePort();
    children.push(
      spawn(bin, ['-c', path.join(dir, 'thumbor.conf'), '-i', '127.0.0.1', '-p', String(port), '-l', 'error'], {
        stdio: 'ignore',
      }),
    );
    bases.push(`http://127.0.0.1:${port}`);
  }
  for (const [i, base] of bases.entries()) {
    await waitFor(
      async () => {
        if (children[i].exitCode !== null) throw new Error(`exited with ${children[i].exitCode}`);
        return (await fetch(`${base}/healthcheck`)).ok;
      },
      20_000,
      `thumbor on ${base}`,
    );
  }
  return {
    bases,
    pids: children.map((child) => /** @type {number} */ (child.pid)),
    stop: () => {
      for (const child of children) child.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Thumbor's run: one wrk per instance at the same time, the connections spread evenly over them, asking for
 * the same boxes as the origin's run (bench/variants.lua). The figures add up; the latencies are the higher
 * of the instances' (percentiles cannot be merged from two summaries).
 * @param {string[]} bases @param {{ format: string, concurrency: number, first: number }} run @param {number} photos
 */
async function thumborRun(bases, { format, concurrency, first }, photos) {
  const names = Array.from({ length: photos }, (_, i) => `photo-${i}.jpg`);
  const connections = Math.max(1, Math.round(concurrency / bases.length));
  const results = await Promise.all(
    bases.map((base, i) =>
      wrkAsync({
        url: base,
        connections,
        threads: 1,
        seconds: SECONDS,
        script: SCRIPT,
        sharedSession: true,
        // instance i numbers its requests from its own part of the block, cycling through every photograph
        scriptArgs: [
          `/unsafe/fit-in/{width}x{height}/filters:format(${format})/{source}`,
          String(BLOCK),
          String(first + (i * BLOCK) / bases.length),
          ...names,
        ],
      }),
    ),
  );
  // a thumbor process answers its health check once the requests wrk left behind are done
  await Promise.all(bases.map((base) => fetch(`${base}/healthcheck`).then((response) => response.arrayBuffer())));
  const sum = (/** @type {'rps'|'requests'|'bytes'|'non2xx'} */ key) =>
    results.reduce((total, result) => total + result[key], 0);
  const worst = (/** @type {'p50_ms'|'p99_ms'} */ key) => Math.max(...results.map((result) => result[key]));
  if (sum('non2xx')) throw new Error(`bench/peers: thumbor answered ${sum('non2xx')} requests with an error`);
  return {
    command: results[0].command,
    rps: sum('rps'),
    requests: sum('requests'),
    bytes: sum('bytes'),
    p50_ms: worst('p50_ms'),
    p99_ms: worst('p99_ms'),
  };
}

/**
 * What each sends for one variant of every photo: bytes, and SSIM against the source resized without
 * encoding (same dimensions). Then thumbor's quality is lowered until its files weigh what ours do.
 * @param {string[]} files @param {string[]} sources @param {any} origin @param {string} thumbor
 */
async function compareOutput(files, sources, origin, thumbor) {
  const results = [];
  for (const format of FORMATS) {
    const ours = await Promise.all(
      sources.map((source) =>
        body(`${origin.base}/p/${base58Url.encode(source)}?width=512&height=512&mode=fit&format=${format}`),
      ),
    );
    const theirs = async (/** @type {number} */ q) =>
      Promise.all(
        files.map((_, i) =>
          body(`${thumbor}/unsafe/fit-in/512x512/filters:format(${format}):quality(${q})/photo-${i}.jpg`),
        ),
      );
    const defaults = await theirs(80);
    const target = total(ours);
    // the highest thumbor quality whose files are no larger than ours (binary search over 1..80)
    let low = 1;
    let high = 80;
    while (low < high) {
      const mid = Math.ceil((low + high) / 2);
      if (total(await theirs(mid)) <= target) low = mid;
      else high = mid - 1;
    }
    const matched = await theirs(low);
    results.push({
      format,
      origin: { quality: 80, kb: total(ours) / files.length / 1024, ssim: await meanSsim(files, ours) },
      thumbor: { quality: 80, kb: total(defaults) / files.length / 1024, ssim: await meanSsim(files, defaults) },
      thumborMatched: { quality: low, kb: total(matched) / files.length / 1024, ssim: await meanSsim(files, matched) },
    });
  }
  return results;
}

/** @param {string} url */
async function body(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return Buffer.from(await response.arrayBuffer());
}

/** @param {Buffer[]} buffers */
function total(buffers) {
  return buffers.reduce((sum, buffer) => sum + buffer.length, 0);
}

/** @param {any[]} list @param {string} key */
const medianOf = (list, key) => spread(list.map((r) => r[key])).median;

/**
 * Each format's best concurrency for each server, and the CPU ms per variant of all its runs.
 * @param {any[]} runs
 * @returns {Record<string, { origin: number, thumbor: number, ratio: number, originCpuMs: number, thumborCpuMs: number }>}
 */
function bestOf(runs) {
  /** @type {Record<string, { origin: number, thumbor: number, ratio: number, originCpuMs: number, thumborCpuMs: number }>} */
  const best = {};
  for (const format of FORMATS) {
    const mine = runs.filter((run) => run.format === format);
    const ours = Math.max(...mine.map((run) => medianOf(run.origin, 'rps')));
    const theirs = Math.max(...mine.map((run) => medianOf(run.thumbor, 'rps')));
    // CPU per variant hardly depends on the concurrency: the median over all of this format's runs
    const all = (/** @type {'origin' | 'thumbor'} */ who) =>
      spread(mine.flatMap((run) => run[who].map((/** @type {any} */ r) => r.cpu_ms_per_variant))).median;
    best[format] = {
      origin: ours,
      thumbor: theirs,
      ratio: ours / theirs,
      originCpuMs: all('origin'),
      thumborCpuMs: all('thumbor'),
    };
  }
  return best;
}

/** @param {Array<{ started: string, runs: any[] }>} passes @param {any[]} quality */
function summarise(passes, quality) {
  const cell = (/** @type {any[]} */ list) => {
    const rps = spread(list.map((r) => r.rps));
    return `${round(rps.min)} / ${round(rps.median)} / ${round(rps.max)}`;
  };
  // every pass's runs of a format and concurrency together
  const runs = passes[0].runs.map((entry, i) => ({
    ...entry,
    origin: passes.flatMap((p) => p.runs[i].origin),
    thumbor: passes.flatMap((p) => p.runs[i].thumbor),
  }));
  const rows = runs.map((run) => [
    run.format,
    run.concurrency,
    cell(run.origin),
    medianOf(run.origin, 'p99_ms'),
    Math.max(...run.origin.map((/** @type {any} */ r) => r.peak_rss_mb)),
    medianOf(run.origin, 'cpu_ms_per_variant').toFixed(1),
    cell(run.thumbor),
    medianOf(run.thumbor, 'p99_ms'),
    Math.max(...run.thumbor.map((/** @type {any} */ r) => r.peak_rss_mb)),
    medianOf(run.thumbor, 'cpu_ms_per_variant').toFixed(1),
    `${Math.round((medianOf(run.origin, 'rps') / medianOf(run.thumbor, 'rps')) * 100)}%`,
  ]);
  const perPass = passes.map((pass) => ({ started: pass.started, best: bestOf(pass.runs) }));
  const ratios = (/** @type {string} */ format) => spread(perPass.map((p) => p.best[format].ratio));
  const percent = (/** @type {number} */ value) => `${Math.round(value * 100)}%`;
  const best = Object.fromEntries(FORMATS.map((format) => [format, { ...ratios(format), cpu: bestOf(runs)[format] }]));
  return {
    best,
    passes: perPass,
    runs,
    quality,
    sections: [
      {
        heading: `Uncached variants: origin vs thumbor ${THUMBOR_VERSION} (same run, alternating)`,
        text: `wrk for ${SECONDS} s per run, ${REPEATS} runs each, every request a new box (bench/variants.lua); req/s as min / median / max. Both read the photographs locally (our origin from its store of fetched originals, thumbor with its file loader), neither keeps results; thumbor runs as ${os.availableParallelism()} single-process instances (one per core, as its documentation deploys it) with the connections spread evenly over them (one wrk each, at the same time; thumbor's p99 is the higher of the two); Pillow decodes JPEG in draft mode (scaled by libjpeg); the origin with its system codecs (SYSTEM_CODECS=auto, since 2026-11-25: the system's libjpeg-turbo decodes, scaled the same way, and its libwebp encodes the WebP; sharp before). Each encodes with its own defaults at q80: the origin's JPEG baseline with the standard quantisation tables (since 2026-11-25; progressive with mozjpeg's table 3 before), thumbor's progressive; WebP effort/method 4 both. The bytes and SSIM table below compares what that gives.`,
        table: {
          columns: [
            'format',
            'concurrency',
            'origin req/s',
            'origin p99 ms',
            'origin peak RSS MB',
            'origin CPU ms per variant',
            'thumbor req/s',
            'thumbor p99 ms',
            'thumbor peak RSS MB',
            'thumbor CPU ms per variant',
            'origin / thumbor',
          ],
          rows,
        },
      },
      {
        heading: `Best concurrency of each, origin / thumbor, in each of ${passes.length} passes (the bar: ≥ 100%)`,
        text: `Each pass is the whole comparison above (every format and concurrency, ${REPEATS} runs each), one after the other; a pass's ratio is the origin's best median req/s over thumbor's. CPU ms per variant: the server processes' CPU time (user + system, all threads) over a run ÷ the variants it made, the median of the pass's runs of that format.`,
        table: {
          columns: [
            'pass',
            'started (UTC)',
            ...FORMATS.flatMap((f) => [
              `${f} origin / thumbor req/s`,
              `${f} ratio`,
              `${f} CPU ms per variant, origin / thumbor`,
            ]),
          ],
          rows: [
            ...perPass.map((p, i) => [
              i + 1,
              p.started.slice(0, 19),
              ...FORMATS.flatMap((f) => [
                `${round(p.best[f].origin)} / ${round(p.best[f].thumbor)}`,
                percent(p.best[f].ratio),
                `${p.best[f].originCpuMs.toFixed(1)} / ${p.best[f].thumborCpuMs.toFixed(1)}`,
              ]),
            ]),
            [
              'min / median / max',
              '',
              ...FORMATS.flatMap((f) => [
                '',
                `${percent(ratios(f).min)} / ${percent(ratios(f).median)} / ${percent(ratios(f).max)}`,
                '',
              ]),
            ],
          ],
        },
      },
      {
        heading:
          'What is sent for the same variant: mean size and SSIM against the source resized unencoded (1 = identical)',
        text: "One 512 × 512 fit variant of each photograph. \"Thumbor, size-matched\" lowers thumbor's quality until its files are no larger than ours: quality at equal size. The reference is resized (lanczos3) from the fully decoded photograph, neither server's pipeline (bench/quality.js); until 2026-11-24 it was resized straight from the file, which is our origin's own decode and reduce, and favoured it.",
        table: {
          columns: [
            'format',
            'origin q80 KB',
            'origin SSIM',
            'thumbor q80 KB',
            'thumbor SSIM',
            'thumbor size-matched q',
            'KB',
            'SSIM',
          ],
          rows: quality.map((q) => [
            q.format,
            q.origin.kb,
            q.origin.ssim.toFixed(4),
            q.thumbor.kb,
            q.thumbor.ssim.toFixed(4),
            q.thumborMatched.quality,
            q.thumborMatched.kb,
            q.thumborMatched.ssim.toFixed(4),
          ]),
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchPeers();
  const file = writeReport('peers', {
    title: 'bench/peers',
    command: `node bench/peers.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
