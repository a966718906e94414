// bench/cache-index: the result cache's index at the size of a real origin's disk. Synthetic variants (64-byte
// records: the index does not care how large a variant is) in 64 MB segments; each measurement is a fresh
// Node process that opens the cache: how long until it serves (init returns), how long until the index is
// built, the longest the event loop stood still meanwhile, and the memory the index holds per variant
// (V8 heap + array buffers after a full GC, less the same process's before). Both ways an index is built:
// reading the segments (the first start after an upgrade or a crash) and from their index files (every
// other start). With the previous index (a Map of objects by hex key, built synchronously) at the smaller
// size, taken from git, for comparison. The page cache is warm (the segments were just written).
//   node bench/cache-index.js [--quick]
import '../lib/src/node-version.js';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { recordHeader } from '../origin/src/cache/pack-cache.js';
import { PackIndex } from '../origin/src/cache/pack-index.js';
import { machine, writeReport } from './lib.js';

const QUICK = process.argv.includes('--quick');
const SIZES = QUICK ? [100_000, 1_000_000] : [1_000_000, 10_000_000];
const DATA = 64;
const RECORD = 48 + DATA;
const SEGMENT_RECORDS = Math.floor((64 * 1024 * 1024) / RECORD);
const REPO = path.resolve(import.meta.dirname, '..');
const TERABYTE_VARIANTS = 1e12 / 25_000;

/** Writes `count` synthetic variants as full segments. @param {string} dir @param {number} count */
export function writeSegments(dir, count) {
  fs.mkdirSync(dir, { recursive: true });
  const data = Buffer.alloc(DATA, 1);
  for (let seq = 1, left = count; left > 0; seq += 1) {
    const records = Math.min(left, SEGMENT_RECORDS);
    const keys = randomBytes(32 * records).toString('hex');
    const parts = [];
    for (let r = 0; r < records; r += 1) parts.push(recordHeader(keys.slice(r * 64, r * 64 + 64), 'webp', data), data);
    fs.writeFileSync(path.join(dir, `${String(seq).padStart(8, '0')}.pack`), Buffer.concat(parts));
    left -= records;
  }
}

/** In the child: opens the cache in `dir` with the module at `modulePath`, prints what it measured. @param {string} modulePath @param {string} dir */
async function child(modulePath, dir) {
  const { PackCache } = await import(modulePath);
  const gc = async () => {
    // array buffers are freed after the collection that finds them dead: twice, with a turn between
    for (let i = 0; i < 3; i += 1) {
      /** @type {() => void} */ (globalThis.gc)();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  await gc();
  const before = process.memoryUsage();
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const started = performance.now();
  const cache = new PackCache(dir, 1e13, { segmentBytes: 64 * 1024 * 1024 });
  cache.init();
  const serving = performance.now() - started;
  await cache.built;
  const built = performance.now() - started;
  delay.disable();
  await gc();
  const after = process.memoryUsage();
  const entries = cache.index.count ? cache.index.count() : cache.index.size;
  const memory = after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers;
  // init() blocks the loop before the monitor's first tick: its time counts as a stall of its own
  const stallMs = Math.max(serving, delay.max / 1e6);
  process.stdout.write(JSON.stringify({ serving, built, stallMs, entries, memory, table: cache.index.bytes ?? null }));
  await cache.close();
}

/**
 * One measurement in a fresh process. @param {string} modulePath @param {string} dir
 * @returns {{ serving: number, built: number, stallMs: number, entries: number, memory: number, table: number | null }}
 */
function measure(modulePath, dir) {
  const run = spawnSync(
    process.execPath,
    ['--expose-gc', '--max-old-space-size=16384', import.meta.filename, '--child', modulePath, dir],
    { encoding: 'utf8', maxBuffer: 1 << 20 },
  );
  if (run.status !== 0) throw new Error(`child failed: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

/** The previous PackCache (before the compact index), from git, in a file of its own. @param {string} dir */
function previousModule(dir) {
  const file = path.join(dir, 'previous-pack-cache.js');
  fs.writeFileSync(
    file,
    execFileSync('git', ['-C', REPO, 'show', 'ab0f14d:origin/src/cache/pack-cache.js'], { encoding: 'utf8' }),
  );
  return file;
}

/** @param {number} ms */
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

/**
 * An index filled from empty to `count` entries, one set() at a time (a cache filling up while it serves):
 * the longest set(), which is where the table grows. `wholeCopy`: each growth finished at once, as before the
 * incremental growth (one copy of every entry). @param {number} count @param {boolean} wholeCopy
 */
function growth(count, wholeCopy) {
  const index = new PackIndex(() => true);
  const keys = randomBytes(16 * count);
  let longest = 0;
  let grew = 0;
  const started = performance.now();
  for (let i = 0; i < count; i += 1) {
    const before = performance.now();
    const moving = index.old;
    index.set(keys, i * 16, 1, i, 64, 0);
    if (!moving && index.old) {
      grew += 1;
      if (wholeCopy) index.finish();
    }
    longest = Math.max(longest, performance.now() - before);
  }
  return { count, wholeCopy, grew, longest, total: performance.now() - started };
}

export async function benchCacheIndex() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cache-index-'));
  const current = path.join(REPO, 'origin/src/cache/pack-cache.js');
  const rows = [];
  try {
    for (const [i, count] of SIZES.entries()) {
      const dir = path.join(work, String(count));
      writeSegments(dir, count);
      if (i === 0) {
        const previous = measure(previousModule(work), dir);
        rows.push({ index: 'previous (Map, synchronous)', count, from: 'segments', ...previous });
      }
      rows.push({ index: 'compact, in the background', count, from: 'segments', ...measure(current, dir) });
      rows.push({ index: 'compact, in the background', count, from: 'index files', ...measure(current, dir) });
      process.stderr.write(`${count}: ${JSON.stringify(rows.slice(-2))}\n`);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  const growths = SIZES.flatMap((count) => [growth(count, true), growth(count, false)]);
  for (const row of growths) process.stderr.write(`growth ${JSON.stringify(row)}\n`);
  const largest = rows.filter((row) => row.count === SIZES[SIZES.length - 1] && row.from === 'index files')[0];
  const perVariant = largest.memory / largest.entries;
  const buildPerVariant = largest.built / largest.entries;
  return {
    rows,
    growths,
    sections: [
      {
        heading: `Result cache index: memory and start-up at ${SIZES.map((n) => n.toLocaleString('en')).join(' and ')} variants`,
        text: `Memory: V8 heap + array buffers after a full GC, less the process's before, ÷ variants indexed (the index's own table in brackets). Serving: until init() returns (the origin listens); built: until the whole index is (misses are transformed meanwhile). Longest stall: the event loop's longest delay from init to built (includes init itself). Extrapolated to 1 TB of 25 KB variants (${(TERABYTE_VARIANTS / 1e6).toFixed(0)} million): ${((perVariant * TERABYTE_VARIANTS) / 1024 ** 3).toFixed(1)} GiB of index and ${seconds(buildPerVariant * TERABYTE_VARIANTS)} to build it from index files (page cache warm; a cold disk reads ${((TERABYTE_VARIANTS * 28) / 1024 ** 3).toFixed(1)} GiB of index files first), serving from the first millisecond.`,
        table: {
          columns: [
            'index',
            'variants',
            'built from',
            'bytes per variant',
            'serving after',
            'built after',
            'longest event-loop stall',
          ],
          rows: rows.map((row) => [
            row.index,
            row.entries.toLocaleString('en'),
            row.from,
            `${(row.memory / row.entries).toFixed(1)}${row.table ? ` (${(row.table / row.entries).toFixed(1)})` : ''}`,
            seconds(row.serving),
            seconds(row.built),
            `${row.stallMs.toFixed(0)} ms`,
          ]),
        },
      },
      {
        heading: 'The index growing while the cache fills: the longest single set()',
        text: 'A fresh index filled from empty, one set() at a time, in one process: each time it is 80 % full it grows by half. "Whole copy": every entry copied to the larger table at once, as before 2026-11-24; "incremental": the entries move 256 slots at each get or set.',
        table: {
          columns: ['variants', 'growth', 'growths', 'longest set()', 'all the sets'],
          rows: growths.map((row) => [
            row.count.toLocaleString('en'),
            row.wholeCopy ? 'whole copy' : 'incremental',
            row.grew,
            `${row.longest.toFixed(1)} ms`,
            seconds(row.total),
          ]),
        },
      },
    ],
  };
}

if (process.argv[2] === '--child') {
  await child(process.argv[3], process.argv[4]);
} else if (import.meta.main) {
  const result = await benchCacheIndex();
  const file = writeReport('cache-index', {
    title: 'bench/cache-index',
    command: `node bench/cache-index.js${QUICK ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
