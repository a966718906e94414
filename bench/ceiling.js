// bench/ceiling (#47): how far the machine itself lets per-core throughput hold as cores fill, whatever the
// server. N independent processes, each pinned to a core of its own (taskset), nothing shared between them but
// the hardware: each makes 512-px variants of the six photographs on one libvips thread (sharp alone, no
// operation cache), or runs a loop of integer arithmetic that touches no memory. Per count: operations a
// second a core and their share of one core's and of two cores'. Where a variant's rate a core falls with the
// count while the arithmetic's holds, the cores share something (caches, memory bandwidth); where both fall,
// the CPUs share cores or the host's clock (hyper-threads of a virtual machine's host, turbo).
//   node bench/ceiling.js        BENCH_CEILING_CORES=1,2,4 (default: 1, 2, 4, … and all), BENCH_SECONDS=4,
//   BENCH_CEILING_KINDS=variant,arithmetic, BENCH_CEILING_REPORT=ceiling
import '../lib/src/node-version.js';
import { spawn } from 'node:child_process';
import os from 'node:os';
import sharp from 'sharp';
import { benchSettings, machine, round, writeReport } from './lib.js';
import { photoFiles } from './quality.js';

const SECONDS = Number(process.env.BENCH_SECONDS || 4);
const TOTAL = os.availableParallelism();
const KINDS = (process.env.BENCH_CEILING_KINDS || 'variant,arithmetic').split(',');
const CORES = (
  process.env.BENCH_CEILING_CORES ||
  [1, 2, 4, 8, 16, 32, 64]
    .filter((n) => n < TOTAL)
    .concat(TOTAL)
    .join(',')
)
  .split(',')
  .map(Number)
  .filter((count) => count <= TOTAL);

/** One process's work until `until` (ms since the epoch): how many operations it finished. @param {string} kind @param {number} until */
async function work(kind, until) {
  let done = 0;
  if (kind === 'arithmetic') {
    let x = 1;
    while (Date.now() < until) {
      for (let i = 0; i < 1e6; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
      done += 1;
    }
    return x === 0.5 ? -1 : done;
  }
  sharp.cache(false);
  sharp.concurrency(1);
  const files = photoFiles();
  while (Date.now() < until) {
    await sharp(files[done % files.length])
      .resize(512, 512, { fit: 'inside' })
      .jpeg({ quality: 80 })
      .toBuffer();
    done += 1;
  }
  return done;
}

/** `count` processes, one a core, each doing `kind` for SECONDS: operations a second, all together. @param {string} kind @param {number} count */
async function atCores(kind, count) {
  const start = Date.now() + 1500;
  const children = Array.from({ length: count }, (_, cpu) =>
    spawn('taskset', ['-c', String(cpu), process.execPath, import.meta.filename, '--child', kind, String(start)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const counts = await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve, reject) => {
          let out = '';
          child.stdout.on('data', (chunk) => (out += chunk));
          child.on('exit', (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`child ${code}`))));
        }),
    ),
  );
  return counts.reduce((sum, n) => sum + n, 0) / SECONDS;
}

/** Every kind at every count, and the report's table. */
export async function benchCeiling() {
  const runs = [];
  for (const kind of KINDS) for (const cores of CORES) runs.push({ kind, cores, ops: await atCores(kind, cores) });
  const perCore = (/** @type {{ ops: number, cores: number }} */ run) => run.ops / run.cores;
  const share = (/** @type {typeof runs[0]} */ run, /** @type {number} */ cores) => {
    const other = runs.find((each) => each.kind === run.kind && each.cores === cores);
    return other ? `${Math.round((100 * perCore(run)) / perCore(other))} %` : '';
  };
  return {
    runs,
    sections: [
      {
        heading: `Independent processes, one a core, ${SECONDS} s a run, one run each`,
        text:
          'variant: a 512-px JPEG of one of six 2560×1600 photographs on one libvips thread (sharp alone), operations ' +
          'a second; arithmetic: a million multiply-adds on a register, loops a second. Nothing is shared between the ' +
          'processes but the machine: what a server pinned to these cores can reach a core, at best.',
        table: {
          columns: ['kind', 'cores', 'a second', 'a second a core', `vs ${CORES[0]} core`, 'vs 2 cores'],
          rows: runs.map((run) => [
            run.kind,
            run.cores,
            round(run.ops),
            round(perCore(run)),
            share(run, CORES[0]),
            share(run, 2),
          ]),
        },
      },
    ],
  };
}

if (process.argv[2] === '--child') {
  const [kind, start] = process.argv.slice(3);
  // everyone starts together, after loading
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(start) - Date.now())));
  process.stdout.write(String(await work(kind, Number(start) + SECONDS * 1000)));
} else if (import.meta.main) {
  const result = await benchCeiling();
  const file = writeReport(process.env.BENCH_CEILING_REPORT || 'ceiling', {
    title: "bench/ceiling: the machine's own per-core throughput as cores fill",
    command: `${benchSettings()}node bench/ceiling.js`,
    machine: await machine(),
    sections: result.sections,
    data: result.runs,
  });
  process.stdout.write(`${file}\n`);
}
